"""Server grouping learned from the ranks (reactccl.runtime.grouping) with fake environments,
and the pattern built on it (no processes: the real-rank tests are in test_runtime_servers.py)."""

import os

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.pattern import verify
from reactccl.runtime.grouping import (
    TEST_HOST_ENV,
    ServerGrouping,
    host_identity,
    plan_servers,
    rank_record,
    server_pattern,
)


def torchrun_env(nodes: int, per_node: int, rank: int) -> dict:
    """What torchrun --nnodes nodes --nproc-per-node per_node sets for ``rank``."""
    return {"RANK": str(rank), "LOCAL_RANK": str(rank % per_node), "LOCAL_WORLD_SIZE": str(per_node),
            "GROUP_RANK": str(rank // per_node), "WORLD_SIZE": str(nodes * per_node)}


def records(hosts, envs=None):
    envs = envs or [{} for _ in hosts]
    return [{**rank_record(e), "host": h} for h, e in zip(hosts, envs, strict=True)]


def test_torchrun_layout_agrees_with_host_identity():
    g = plan_servers(records(["a", "a", "b", "b"], [torchrun_env(2, 2, r) for r in range(4)]))
    assert g.servers == ((0, 1), (2, 3)) and g.hierarchical and g.in_rank_order
    assert (g.num_servers, g.gpus, g.warnings) == (2, 2, ())
    assert g.order.tolist() == [0, 1, 2, 3] and g.server_of_rank().tolist() == [0, 0, 1, 1]
    assert "launcher variables checked" in g.reason
    assert g.describe().startswith("2 servers x 2 ranks (hierarchical)")


def test_plain_spawn_interleaved_hosts_relabels_servers_to_consecutive_positions():
    g = plan_servers(records(["a", "b", "a", "b", "a", "b"]))
    assert g.servers == ((0, 2, 4), (1, 3, 5)) and g.hierarchical and not g.in_rank_order
    assert g.order.tolist() == [0, 2, 4, 1, 3, 5]
    assert "no launcher variables" in g.reason and "relabelled" in g.reason


def test_a_lying_launcher_is_named_and_host_identity_wins():
    # the launcher says one rank per node, but two ranks share each host
    envs = [torchrun_env(4, 1, r) for r in range(4)]
    g = plan_servers(records(["a", "a", "b", "b"], envs))
    assert g.servers == ((0, 1), (2, 3)) and g.hierarchical
    assert any("rank 0: LOCAL_WORLD_SIZE=1, but 2 rank(s) share its host 'a'" in w for w in g.warnings)
    assert any("different GROUP_RANKs" in w for w in g.warnings)
    assert "contradicted and ignored" in g.reason
    # one GROUP_RANK claimed on two hosts
    envs = [torchrun_env(1, 4, r) for r in range(4)]
    g = plan_servers(records(["a", "a", "b", "b"], envs))
    assert any("GROUP_RANK=0 is also claimed by a rank on another host" in w for w in g.warnings)


def test_local_rank_orders_the_ranks_inside_a_server():
    # GPU index = LOCAL_RANK: rank 1 drives GPU 0 of host a, rank 0 GPU 1
    envs = [{"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"},
            {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}, {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}]
    g = plan_servers(records(["a", "a", "b", "b"], envs))
    assert g.servers == ((1, 0), (2, 3)) and g.order.tolist() == [1, 0, 2, 3] and g.warnings == ()
    # LOCAL_RANKs that are not 0..g-1 on a host: rank order, and said so
    envs[1]["LOCAL_RANK"] = "1"
    g = plan_servers(records(["a", "a", "b", "b"], envs))
    assert g.servers == ((0, 1), (2, 3)) and "not a permutation of 0..1" in g.warnings[0]


@pytest.mark.parametrize("hosts, words", [
    (["a", "a", "a", "b"], "different numbers of ranks [3, 1]"),
    (["a", "a", "a", "a"], "all 4 ranks share one host"),
    (["a", "b", "c", "d"], "one rank per host"),
])
def test_shapes_without_a_hierarchy_fall_back_to_flat_with_the_reason(hosts, words):
    g = plan_servers(records(hosts))
    assert not g.hierarchical and words in g.reason
    p = server_pattern("ring", 4, g, nics=2)        # nics means nothing without servers: dropped
    assert p.name == generate("ring", 4).name
    assert np.array_equal(p.src, generate("ring", 4).src) and np.array_equal(p.dst, generate("ring", 4).dst)
    if words.startswith("different"):
        assert g.gpus is None and g.describe().startswith("2 servers of [3, 1] ranks (flat)")


def test_bad_records_are_named():
    with pytest.raises(ValueError, match="no rank records"):
        plan_servers([])
    with pytest.raises(ValueError, match="rank 1's record has no host identity"):
        plan_servers([{"host": "a"}, {"LOCAL_RANK": 0}])


def test_host_identity_names_the_network_namespace_and_the_test_override():
    me = host_identity({})
    assert me.endswith("/" + str(os.stat("/proc/self/ns/net").st_ino))
    assert host_identity({TEST_HOST_ENV: "node1"}) == "test:node1"
    rec = rank_record({"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "x"})
    assert rec == {"host": me, "LOCAL_RANK": 3, "LOCAL_WORLD_SIZE": None, "GROUP_RANK": None}


def _inter_server_bytes(pattern, server_of_rank):
    inter = server_of_rank[pattern.src] != server_of_rank[pattern.dst]
    return np.bincount(server_of_rank[pattern.dst][inter], weights=pattern.flow_fraction[inter],
                       minlength=server_of_rank.max() + 1)


@pytest.mark.parametrize("algorithm", ["ring", "nccl-tree"])
def test_interleaved_servers_get_the_hierarchy_relabelled_onto_their_ranks(algorithm):
    hosts = ["a", "b", "a", "b", "a", "b", "a", "b"]          # 2 servers x 4, interleaved
    g = plan_servers(records(hosts))
    p = server_pattern(algorithm, 8, g)
    verify(p)
    ref = generate(algorithm, 8, servers=2, gpus=4)           # on positions: server = position // 4
    assert p.num_flows == ref.num_flows
    # every flow that stays inside a server on positions stays inside the real server
    server = g.server_of_rank()
    assert np.array_equal(server[p.src] == server[p.dst], (ref.src // 4) == (ref.dst // 4))
    assert _inter_server_bytes(p, server).tolist() == _inter_server_bytes(ref, np.arange(8) // 4).tolist()
    # the relabelling is exactly position -> rank
    assert np.array_equal(p.src, g.order[ref.src]) and np.array_equal(p.dst, g.order[ref.dst])


def test_rank_ordered_servers_give_the_generator_pattern_and_explicit_options_win():
    g = plan_servers(records(["a", "a", "b", "b", "c", "c"]))
    p = server_pattern("nccl-tree", 6, g, nics=1)
    ref = generate("nccl-tree", 6, servers=3, gpus=2, nics=1)
    assert p.name == ref.name and np.array_equal(p.src, ref.src) and np.array_equal(p.dst, ref.dst)
    flat = server_pattern("ring", 6, g, hierarchy="flat")
    assert flat.name == generate("ring", 6).name
    other = server_pattern("recursive-doubling", 4, plan_servers(records(["a", "a", "b", "b"])))
    assert other.name == generate("recursive-doubling", 4).name
    with pytest.raises(ValueError, match="grouping has 6 ranks, the pattern 4"):
        server_pattern("ring", 4, g)
    assert isinstance(g, ServerGrouping)

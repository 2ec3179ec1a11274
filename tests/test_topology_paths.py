"""Fewest-hop paths from compiled BFS (topology/paths.py) against the networkx reference, on every builder."""

import networkx as nx
import numpy as np
import pytest

from reactccl.topology import Topology, TopologyError, add_cable, fat_tree, parse_topology, stable_hash
from reactccl.topology.paths import FewestHops

SPECS = ["star:hosts=5", "fat-tree:k=4", "fat-tree:k=6", "leaf-spine:leaves=3,spines=2,hosts=2",
         "alibaba:tors=4,aggs=3,hosts=2", "full-mesh:tors=4,hosts=2",
         "rail:servers=3,gpus=2", "rail:servers=3,gpus=4,nics=2,pxn=0,leaves_per_rail=2",
         "fat-tree:k=4,gpus=2", "leaf-spine:leaves=2,spines=2,hosts=2,gpus=4,nics=2,pxn=1"]


@pytest.mark.parametrize("spec", SPECS)
def test_every_pair_equals_the_networkx_reference(spec):
    t = parse_topology(spec)
    H = t.num_hosts
    src, dst = np.divmod(np.arange(H * H), H)
    fast = t._path_tables(src, dst)          # one batched call: the path ECMP takes
    for s, d, table in zip(src.tolist(), dst.tolist(), fast, strict=True):
        ref = t.reference_paths(s, d)
        assert table.dtype == np.int64 and np.array_equal(table, ref), (spec, s, d)
        assert not table.flags.writeable


def test_ecmp_choices_unchanged_from_the_reference():
    # the hash picks index h mod m among the sorted paths, so equal tables give equal choices;
    # check the picks directly against the reference tables on a fat-tree k=4 with several ports
    t = fat_tree(4)
    src, dst = np.repeat(np.arange(16), 16), np.tile(np.arange(16), 16)
    keys = np.column_stack([np.zeros(256, int), np.arange(256), np.arange(256) % 4])
    ptr, links = t.ecmp_paths(src, dst, keys)
    h = stable_hash(src, dst, *keys.T)
    for f in range(256):
        ref = t.reference_paths(int(src[f]), int(dst[f]))
        assert links[ptr[f]:ptr[f + 1]].tolist() == ref[int(h[f] % np.uint64(len(ref)))].tolist()


def test_distances_through_shared_successors_equal_direct_bfs():
    t = fat_tree(4)
    hops = t.fewest_hops()
    hosts = t._host_node
    shared = hops.distances(hosts)            # 16 hosts share 8 edge switches: the successor form
    direct = hops._bfs(hosts)
    assert np.array_equal(shared, direct)
    assert shared[0, hosts[0]] == 0 and shared[0, hosts[1]] == 2 and shared[0, hosts[15]] == 6


def test_path_counts_on_fat_tree_k8():
    # under one edge: 1 path of 2 links; same pod: k/2 = 4 paths of 4; across pods: (k/2)^2 = 16 of 6
    t = fat_tree(8)
    assert [len(t.shortest_paths(0, d)) for d in (1, 4, 127)] == [1, 4, 16]
    assert [t.shortest_paths(0, d)[0].size for d in (1, 4, 127)] == [2, 4, 6]


def test_unreachable_and_self():
    g = nx.DiGraph()
    for h in ("a", "b", "c"):
        g.add_node(h, kind="host")
    g.add_node("s", kind="switch")
    add_cable(g, "a", "s", 1e9, 0)
    add_cable(g, "b", "s", 1e9, 0)
    t = Topology(g)
    assert t._path_array(0, 0).shape == (1, 0)
    with pytest.raises(TopologyError, match="no path from host 'a' to host 'c'"):
        t.shortest_paths("a", "c")
    with pytest.raises(TopologyError, match="no path"):
        t.reference_paths("a", "c")


def test_duplicate_links_refused():
    with pytest.raises(ValueError, match="same ordered pair"):
        FewestHops(2, np.array([0, 0]), np.array([1, 1]))
    with pytest.raises(ValueError, match="out of range"):
        FewestHops(2, np.array([0]), np.array([2]))

"""Real Gloo ranks on "servers": the grouping learned at run time and the hierarchical pattern
it builds, bit-exact against ``dist.all_reduce`` (issue 32 item 5).

Several hosts on one machine come from the test-only host override ``REACTCCL_TEST_HOST_ID``
(reactccl.runtime.grouping): set per rank under ``run_local`` (a plain spawn, no launcher
variables), per torchrun invocation under two ``torchrun --nnodes 2 --node-rank I`` on one
static rendezvous.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from reactccl.runtime.grouping import TEST_HOST_ENV  # noqa: E402
from reactccl.runtime.local import free_port, run_local  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]


CASES = {  # name: (host of every rank, launcher variables of every rank)
    "interleaved": (["a", "b", "a", "b"], [{}] * 4),
    "lying": (["a", "a", "b", "b"], [{"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(r)}
                                     for r in range(4)]),
    "uneven": (["a", "a", "a", "b"], [{}] * 4),
}


def _child_spawn(rank, world):
    import reactccl.torch as rt
    out = {}
    g = torch.Generator().manual_seed(rank)
    for case, (hosts, env) in CASES.items():
        os.environ[TEST_HOST_ENV] = hosts[rank]
        os.environ.update(env[rank])
        out[case] = {}
        for algorithm in ("ring", "nccl-tree"):
            ar = rt.ReactAllReduce(algorithm=algorithm, react=False, timeout=20)
            x = torch.randint(-(1 << 40), 1 << 40, (1001,), generator=g, dtype=torch.int64)
            mine, ref = x.clone(), x.clone()
            ar(mine)
            dist.all_reduce(ref)
            out[case][algorithm] = dict(
                servers=[list(s) for s in ar.grouping.servers], reason=ar.grouping.reason,
                warnings=list(ar.grouping.warnings), hierarchical=ar.grouping.hierarchical, name=ar.pattern.name,
                src=ar.pattern.src.tolist(), dst=ar.pattern.dst.tolist(), exact=bool(torch.equal(mine, ref)))
            ar.close()
        for k in env[rank]:
            del os.environ[k]
    flat = rt.ReactAllReduce(algorithm="ring", react=False, servers="flat")
    out["flat"] = (flat.grouping, flat.pattern.name)
    flat.close()
    return out


@pytest.fixture(scope="module")
def spawned():
    """The three cases of CASES on one set of 4 spawned Gloo ranks (one start-up for all)."""
    return run_local(_child_spawn, 4, timeout=240)


def test_spawned_ranks_on_interleaved_hosts_run_the_relabelled_hierarchy_exactly(spawned):
    # ranks 0, 2 on host a and 1, 3 on host b (a plain spawn: no launcher variables)
    for r in spawned:
        for alg in ("ring", "nccl-tree"):
            a = r["interleaved"][alg]
            assert a["servers"] == [[0, 2], [1, 3]] and a["hierarchical"], a
            assert "relabelled" in a["reason"] and a["exact"]
            assert "servers=2,gpus=2" in a["name"]
            # only the server's two ranks talk inside it: no flow 0<->2 or 1<->3 crosses servers
            server = [0, 1, 0, 1]
            inter = [(s, d) for s, d in zip(a["src"], a["dst"], strict=True) if server[s] != server[d]]
            assert inter and all({s, d} in ({0, 1}, {0, 3}, {2, 1}, {2, 3}) for s, d in inter)
            assert len(inter) < len(a["src"])                      # and some flows stay inside
        assert r["flat"] == (None, "ring")
    assert spawned[0]["interleaved"]["ring"]["src"] == spawned[3]["interleaved"]["ring"]["src"]


def test_a_launcher_claiming_one_rank_per_node_is_overruled_by_host_identity(spawned):
    for r in spawned:
        a = r["lying"]["ring"]
        assert a["servers"] == [[0, 1], [2, 3]] and a["exact"] and a["hierarchical"]
        assert any("LOCAL_WORLD_SIZE=1, but 2 rank(s) share its host" in w for w in a["warnings"])


def test_uneven_hosts_fall_back_to_the_flat_pattern_and_say_why(spawned):
    for r in spawned:
        a = r["uneven"]["ring"]
        assert not a["hierarchical"] and "different numbers of ranks [3, 1]" in a["reason"]
        assert a["name"] == "ring" and a["exact"] and r["uneven"]["nccl-tree"]["exact"]


@pytest.mark.slow
def test_two_torchrun_nodes_of_two_ranks_run_the_hierarchy_bit_exact():
    """2 x 2 ranks under two ``torchrun --nnodes 2 --node-rank I --nproc-per-node 2`` on one static
    rendezvous (127.0.0.1), each with its own test-only host id: every rank learns servers
    [[0, 1], [2, 3]] (torchrun's layout, launcher variables agreeing) and runs the hierarchical ring
    and tree, equal to ``dist.all_reduce`` on int64 and on integer-valued float32, and on random
    float32 bit-identical on every rank and within 1e-5 of Gloo's own sum."""
    port = free_port()
    procs = []
    for node in (0, 1):
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo",
                   **{TEST_HOST_ENV: f"node{node}"})
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(node),
               "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
               str(ROOT / "tests" / "servers_worker.py")]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                      cwd=ROOT))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=180)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outs)
    results = [json.loads(line.split("RESULT ", 1)[1]) for o in outs for line in o.splitlines() if "RESULT " in line]
    assert sorted(r["rank"] for r in results) == [0, 1, 2, 3]
    for r in results:
        assert r["env"]["LOCAL_WORLD_SIZE"] == "2" and int(r["env"]["GROUP_RANK"]) == r["rank"] // 2
        for alg in ("ring", "nccl-tree"):
            a = r[alg]
            assert a["servers"] == [[0, 1], [2, 3]] and a["hierarchical"], a
            assert a["pattern"].startswith(f"{alg}(servers=2,gpus=2,nics=2"), a["pattern"]
            assert a["int64"] and a["float_exact"] and a["float_identical"], a
            assert a["float_err"] < 1e-5, a

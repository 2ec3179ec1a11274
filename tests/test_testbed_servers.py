"""The emulated cluster with G ranks per host namespace (root + iproute2 + torch): the ranks learn
their servers from network-namespace identity, talk unshaped inside a host (loopback) and shaped
between hosts; and the servers experiment (static hierarchical pattern vs REACT, one host's link
congested)."""

import json
import sys
from pathlib import Path

import pytest

from reactccl.testbed import Testbed, netns_unavailable

pytest.importorskip("torch")
pytestmark = [pytest.mark.netns, pytest.mark.torch,
              pytest.mark.skipif(netns_unavailable() is not None, reason=str(netns_unavailable()))]
ROOT = Path(__file__).resolve().parents[1]
GOODPUT = 1448 / 1514


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("REACTCCL_TESTBED_DIR", str(tmp_path))


def test_two_ranks_per_host_learn_their_servers_and_talk_unshaped_inside_a_host():
    """2 hosts x 2 ranks at 50 Mbit/s. Every rank learns servers [[0, 1], [2, 3]] from its network
    namespace (the launcher's variables agree: no warnings). 4 MB from rank 0 to rank 2 (other host)
    crosses the shaped link: at least 4e6 * 8 / (50e6 * 1448/1514) = 0.67 s; to rank 1 (same
    namespace, loopback) it takes a small fraction of that."""
    with Testbed(hosts=2, rate="50mbit") as tb:
        res = tb.run([sys.executable, str(ROOT / "tests" / "testbed_probe.py")], stream=False, timeout=120,
                     ranks_per_host=2, env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})
        assert len(tb.namespaces()) == 3
    assert res.returncode == 0 and len(res.codes) == 4, "\n".join(o[-2000:] for o in res.output)
    probes = [json.loads(line.split("PROBE ", 1)[1]) for o in res.output for line in o.splitlines()
              if line.startswith("PROBE ")]
    assert sorted(p["rank"] for p in probes) == [0, 1, 2, 3]
    for p in probes:
        assert p["servers"] == [[0, 1], [2, 3]] and p["hierarchical"] and p["warnings"] == []
        assert p["env"] == {"RANK": str(p["rank"]), "LOCAL_RANK": str(p["rank"] % 2), "GROUP_RANK": str(p["rank"] // 2)}
    shaped = 4e6 * 8 / (50e6 * GOODPUT)
    by_rank = {p["rank"]: p for p in probes}
    print(f"4 MB to the same host {by_rank[1]['same_host_s'] * 1e3:.1f} ms, to the other host "
          f"{by_rank[2]['other_host_s'] * 1e3:.0f} ms (shaped ideal {shaped * 1e3:.0f} ms)")
    assert 0.95 * shaped < by_rank[2]["other_host_s"] < 2.0 * shaped, by_rank[2]
    assert by_rank[1]["same_host_s"] < 0.2 * shaped, by_rank[1]


@pytest.mark.slow
def test_servers_experiment_static_hierarchy_beats_flat_and_feels_the_congested_host(tmp_path, monkeypatch):
    """4 hosts x 2 ranks at 200 Mbit/s, 2 MB AllReduce, ``nccl-tree``: the ranks learn 4 servers of 2
    and run NCCL's hierarchical tree (one NIC per host: 2 channels, tree 0 and tree 1 over servers),
    interleaved ABAB with REACT and with the flat tree over the 8 ranks, p = 0 and 2 external flows
    into host 1 (an inner node of the double binary tree over servers: 2.0 of the message crosses
    its downlink, against 1.0 for hosts 0 and 3).

    Asserted: the grouping and the pattern; the static hierarchy beats the flat tree without
    congestion (its busiest host link carries 2.0 of the message, the flat tree's 3.0: ideally 1.5x);
    the congestion is real. REACT's arm is printed, not asserted: the tuner on main moves single
    ranks across servers (issue 32 item 4 brings server-level moves), see the report printed.
    Seen: hierarchical 0.28 s, flat ~0.4 s at p = 0; 1.0 s at p = 2."""
    from reactccl.testbed.experiment import ExperimentConfig, format_table, run_experiment, summarize
    monkeypatch.setenv("REACTCCL_TESTBED_DIR", str(tmp_path / "state"))
    cfg = ExperimentConfig(hosts=(4,), flows=(0, 2), rate="200mbit", mbytes=2.0, epochs=20, rounds=2, skip=20,
                           modes=("baseline", "react", "flat"), ranks_per_host=2, timeout=600)
    res = run_experiment(cfg, tmp_path / "out", progress=print)
    rows = {r["flows"]: r for r in summarize(res)}
    print(format_table(list(rows.values())))
    for run in res["runs"]:
        react = run["modes"]["react"]
        print(f"p = {run['flows']}: REACT's decisions (inter-host flows after each change: "
              f"{react['inter_host_flows']}; the static hierarchical tree has 12)")
        print(react.get("report", ""))
    for run in res["runs"]:
        assert run["pattern"].startswith("nccl-tree(servers=4,gpus=2,nics=1,channels=2"), run["pattern"]
        assert run["servers"] == [[0, 1], [2, 3], [4, 5], [6, 7]] and run["victim"] == 1
        assert run["host_in_fraction"] == [1.0, 2.0, 2.0, 1.0]
    calm, congested = rows[0], rows[2]
    assert calm["baseline_mean"] < 0.9 * calm["flat_mean"]           # the hierarchy pays on host links
    assert congested["baseline_mean"] > 1.3 * calm["baseline_mean"]  # the congestion is real

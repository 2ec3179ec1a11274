"""Input checks and run guards of the simulator: bulk rates that cannot drain, engine caps on events and
backlog, degrade rates and cable ids, message sizes, empty collectives, and the ``simulate`` flags."""

import json
import math

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.cli.main import main
from reactccl.netsim import (
    BackgroundError, Bulk, FluidEngine, SimulatedCluster, SimulationError, parse_degrade, random_degrade,
    resolve_background, run_simulation,
)
from reactccl.netsim.reference import MAX_BACKLOG
from reactccl.topology import TopologyError, fat_tree, star


# ------------------------------------------------------------------ bulk rates
def test_bulk_offering_at_least_its_path_capacity_is_rejected():
    topo = fat_tree(4)
    place = np.arange(8)
    # 50 MB every 2 ms = 200 Gbps into 100 Gbps links (the tester's scenario)
    with pytest.raises(BackgroundError, match=r"offers 200 Gbps .* smallest capacity is 100 Gbps"):
        resolve_background([Bulk("h12", "h3", 50e6, 2e-3, 1e-3)], topo, place)
    # exactly the capacity (25 MB / 2 ms = 100 Gbps) never drains either
    with pytest.raises(BackgroundError, match="offers 100 Gbps"):
        resolve_background([Bulk("h12", "h3", 25e6, 2e-3)], topo, place)
    _, bulks = resolve_background([Bulk("h12", "h3", 24e6, 2e-3)], topo, place)  # 96 Gbps drains
    assert bulks == [Bulk(12, 3, 24e6, 2e-3, 0.0)]


def test_bulk_rate_checked_against_a_degraded_path():
    topo = star(3)
    down1 = topo.host_links(1)[1]
    # 1 MB every 200 us = 40 Gbps: fine at 100 Gbps, too much once h1's downlink runs at 30 Gbps
    SimulatedCluster(topo, [0, 1], 1e6, background=[Bulk(2, 1, 1e6, 200e-6)]).run_epoch(generate("ring", 2))
    c = SimulatedCluster(topo, [0, 1], 1e6, background=[Bulk(2, 1, 1e6, 200e-6)], degrade={down1: 30e9})
    with pytest.raises(BackgroundError, match="offers 40 Gbps .* smallest capacity is 30 Gbps"):
        c.run_epoch(generate("ring", 2))


def test_cli_tester_bulk_command_fails_fast(capsys):
    rc = main(["simulate", "--algorithm", "nccl-tree", "--ranks", "8", "--topology", "fat-tree:k=4",
               "--epochs", "20", "--seed", "1", "--background",
               "bulk:src=h12,dst=h3,bytes=50MB,period=2ms,phase=1ms"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "bulk:src=h12,dst=h3" in err and "200 Gbps" in err and "100 Gbps" in err


def test_help_bulk_example_exists_and_drains(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "h20" not in out
    assert "bulk:src=h12,dst=h3,bytes=5MB,period=2ms" in out
    r = run_simulation("nccl-tree", 8, topology="fat-tree:k=4", size="2MB", epochs=2,
                       background=["bulk:src=h12,dst=h3,bytes=5MB,period=2ms,phase=1ms"])
    assert r.bulk == [{"src": "h12", "dst": "h3", "bytes": 5e6, "period_s": 2e-3, "phase_s": 1e-3}]


# --------------------------------------------------------------- engine guards
def test_engine_backlog_guard_names_the_source():
    # 50 MB every 2 ms (200 Gbps) on a 100 Gbps link next to a watched flow that never ends soon:
    # every burst takes >= 4 ms, so bursts pile up; the 21st in flight trips max_backlog=20.
    eng = FluidEngine(np.array([100e9]), max_backlog=20)
    eng.add_flows([[0]], [1e12], [0.0], [0], [()], [0.0], watched=True)
    eng.add_periodic([0], 50e6, 0.0, 0.0, 2e-3)
    with pytest.raises(SimulationError, match=r"periodic source 0 .*backlog grew to 21 bursts.*200 Gbps"):
        eng.run()
    assert FluidEngine(np.ones(1)).max_backlog == MAX_BACKLOG == 1000


def test_engine_counts_carried_bursts_toward_the_backlog():
    eng = FluidEngine(np.array([100e9]), max_backlog=2)
    eng.add_periodic([0], 1e6, 0.0, 1.0, 1.0)
    assert eng.add_burst(0, [0], 5e5, 0.0) == 0 and eng.add_burst(0, [0], 5e5, 0.0) == 1
    assert eng.origin == {0: 0, 1: 0}
    with pytest.raises(SimulationError, match="backlog grew to 3 bursts"):
        eng.add_burst(0, [0], 5e5, 0.0)
    with pytest.raises(SimulationError, match="no periodic source 4"):
        eng.add_burst(4, [0], 5e5, 0.0)


def test_engine_event_cap():
    # 1 MB at 1 Gbps = 8 ms while a 1 kB burst every 10 us keeps emitting: 2 events per burst
    eng = FluidEngine(np.array([1e9, 1e9]), max_events=50)
    eng.add_flows([[0]], [1e6], [0.0], [0], [()], [0.0], watched=True)
    eng.add_periodic([1], 1e3, 0.0, 0.0, 10e-6)
    with pytest.raises(SimulationError, match="max_events=50"):
        eng.run()
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="must be an integer >= 1"):
            FluidEngine(np.ones(1), max_events=bad)
        with pytest.raises(ValueError, match="max_backlog"):
            FluidEngine(np.ones(1), max_backlog=bad)


# --------------------------------------------------------------------- degrade
def test_degrade_rate_may_only_lower_a_capacity():
    topo = fat_tree(4)
    with pytest.raises(BackgroundError, match=r"300 Gbps is above link \d+ .* capacity 100 Gbps"):
        parse_degrade("random:k=2:rate=300G", topo)
    with pytest.raises(BackgroundError, match="above link 12"):
        parse_degrade("link=12:rate=101G", topo)
    with pytest.raises(BackgroundError, match="rate: must be a positive"):
        parse_degrade("link=12:rate=0", topo)
    with pytest.raises(BackgroundError, match="rate must be > 0"):
        random_degrade(topo, 1, -5e9)
    assert parse_degrade("link=12:rate=100G", topo) == {12: 100e9}  # equal: allowed, no change
    with pytest.raises(TopologyError, match="above its own"):
        topo.degraded({3: 200e9})


def test_degrade_cable_sets_both_directions():
    topo = fat_tree(4)
    cables = topo.cables()
    a, b = cables[5].tolist()
    assert topo.link_src[a] == topo.link_dst[b] and topo.link_dst[a] == topo.link_src[b]
    assert parse_degrade("cable=5:rate=30G", topo) == {a: 30e9, b: 30e9}
    c, d = cables[7].tolist()
    assert parse_degrade("cable=5,7:rate=30G", topo) == {a: 30e9, b: 30e9, c: 30e9, d: 30e9}
    assert parse_degrade(f"link={a}:rate=30G", topo) == {a: 30e9}  # link: one direction only
    for bad, msg in [(f"cable={len(cables)}:rate=1G", f"id {len(cables)} out of range"),
                     ("cable=1:link=2:rate=1G", "expected random"), ("cable=x:rate=1G", "must be an integer")]:
        with pytest.raises(BackgroundError, match=msg):
            parse_degrade(bad, topo)


def test_link_rows_and_cli_list_links(capsys):
    rows = star(2).link_rows()
    # star(2): cables s0-h0 (links 0, 2) and s0-h1 (links 1, 3)
    assert [(r["link"], r["cable"], r["src"], r["dst"]) for r in rows] == [
        (0, 0, "s0", "h0"), (1, 1, "s0", "h1"), (2, 0, "h0", "s0"), (3, 1, "h1", "s0")]
    assert rows[0]["capacity"] == 100e9 and rows[0]["latency"] == 1e-6
    assert main(["simulate", "--list-links", "-t", "star:hosts=2"]) == 0
    out = capsys.readouterr().out
    assert "4 links in 2 cables" in out and "cable=ID both" in out
    assert main(["simulate", "--list-links", "-t", "mesh:k=3"]) == 2
    assert main(["simulate", "-t", "star:hosts=2"]) == 2
    assert "--algorithm: required" in capsys.readouterr().err


# ------------------------------------------------------------- message size
@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "abc"])
def test_cluster_message_bytes_checked(bad):
    with pytest.raises(ValueError, match="message_bytes"):
        SimulatedCluster(star(2), [0, 1], bad)


# ----------------------------------------------------------------- simulate CLI
@pytest.mark.parametrize("warmup", ["200", "-3", "10"])
def test_cli_warmup_must_lie_inside_the_run(capsys, warmup):
    rc = main(["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-s", "1MB", "-e", "10", "--react",
               "--warmup", warmup])
    assert rc == 2
    assert f"--warmup: must satisfy 0 <= warmup < epochs (10), got {warmup}" in capsys.readouterr().err


def test_cli_react_summary_is_labelled(capsys):
    rc = main(["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-s", "1MB", "-e", "4", "--react",
               "--warmup", "1"])
    assert rc == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "REACT run:" and out[1].startswith("ring (allreduce), 4 ranks")
    assert any(line.startswith("epochs 1..3") for line in out)


def test_empty_collective_reports_no_bandwidth(capsys):
    tr = SimulatedCluster(star(2), [0], 1e6).run_epoch(generate("ring", 1))
    assert tr.duration == 0.0 and math.isnan(tr.algbw) and math.isnan(tr.busbw)
    assert main(["simulate", "-a", "ring", "-n", "1", "-t", "star:hosts=2", "-e", "2"]) == 0
    out = capsys.readouterr().out
    assert "the collective is empty (0 flows, 1 rank)" in out and "inf" not in out and "algbw" not in out
    assert main(["simulate", "-a", "ring", "-n", "1", "-t", "star:hosts=2", "-e", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["algbw_Bps"] == [None, None] and doc["stats"]["algbw_Bps"] is None

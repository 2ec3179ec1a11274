"""Experiment framework: seeded scenarios, metrics and improvement arithmetic, aggregation,
baseline runs, pattern views. (Runs with REACT are in test_experiments_react.py.)"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.experiments import (
    EXPERIMENTS, SweepConfig, aggregate, epoch_metrics, improvement, random_pairs_scenario, run_scenario,
    scenario_seed, summarize,
)
from reactccl.experiments.patterns_view import busiest_receiver, moved_positions, pattern_view, tree_text
from reactccl.experiments.scenario import (
    degraded_scenario, network_sharing_scenario, shared_nodes_scenario, topology,
)

STATIC2 = (("baseline", (False,)), ("again", (False,)))


# ------------------------------------------------------------------ metrics
def test_epoch_metrics_by_hand():
    # S = 10 bytes; after warmup 1: times 1, 2, 4, 5 s (index 0 dropped)
    m = epoch_metrics([100.0, 1.0, 2.0, 4.0, 5.0], 10.0, warmup=1)
    assert m["epochs"] == 4
    assert m["mean_time"] == pytest.approx(3.0)
    assert m["mean_algbw"] == pytest.approx((10 + 5 + 2.5 + 2) / 4)  # mean of S / t_e
    # numpy's linear p95 of [1, 2, 4, 5]: 4 + 0.85 * (5 - 4) = 4.85
    assert m["p95_time"] == pytest.approx(4.85)
    assert m["p95_algbw"] == pytest.approx(10 / 4.85)


def test_epoch_metrics_errors():
    with pytest.raises(ValueError, match="no epochs after warmup=3"):
        epoch_metrics([1.0, 2.0], 1.0, warmup=3)
    with pytest.raises(ValueError, match="must be > 0"):
        epoch_metrics([1.0, 0.0], 1.0, warmup=0)


def test_improvement_arithmetic():
    assert improvement(13.5, 10.0) == pytest.approx(35.0)
    assert improvement(8.0, 10.0) == pytest.approx(-20.0)
    assert improvement(10.0, 10.0) == 0.0
    with pytest.raises(ValueError, match="baseline algbw must be > 0"):
        improvement(1.0, 0.0)


def test_summarize():
    s = summarize([10.0, -5.0, 40.0])
    assert (s["mean"], s["min"], s["max"], s["median"], s["n"]) == (15.0, -5.0, 40.0, 10.0, 3)
    with pytest.raises(ValueError, match="no values"):
        summarize([])


def _result(setting, base, react, p95b=None, p95r=None):
    """A hand-made run_scenario result: one job, baseline and react mean algbw."""
    p95b, p95r = p95b or base, p95r or react
    return {"scenario": {"setting": setting},
            "arms": {"baseline": {"jobs": [{"mean_algbw": base, "p95_algbw": p95b, "changes": 0}]},
                     "react": {"jobs": [{"mean_algbw": react, "p95_algbw": p95r, "changes": 3}]}},
            "improvement": {"react": [improvement(react, base)]},
            "p95_improvement": {"react": [improvement(p95r, p95b)]}}


def test_aggregate_hand_made_results():
    res = [_result({"x": 1}, 10.0, 12.0), _result({"x": 1}, 10.0, 9.0),
           _result({"x": 2}, 4.0, 6.0, p95b=2.0, p95r=3.0)]
    rows = aggregate(res)
    assert [r["setting"] for r in rows] == [{"x": 1}, {"x": 2}]
    a, b = rows
    assert a["improvement"]["values"] == pytest.approx([20.0, -10.0])
    assert a["improvement"]["mean"] == pytest.approx(5.0)
    assert (a["improvement"]["min"], a["improvement"]["max"]) == pytest.approx((-10.0, 20.0))
    assert a["baseline_algbw"] == pytest.approx(10.0) and a["arm_algbw"] == pytest.approx(10.5)
    assert a["changes"] == 3
    assert b["improvement"]["mean"] == pytest.approx(50.0)
    assert b["p95_improvement"]["mean"] == pytest.approx(50.0)
    assert (b["baseline_p95_algbw"], b["arm_p95_algbw"]) == pytest.approx((2.0, 3.0))
    assert a["arm"] == "react" and a["job_name"] == "job 1"


# ---------------------------------------------------------------- scenarios
def test_random_pairs_scenario_is_seeded():
    a = random_pairs_scenario("t", (("x", 4), ("p", 2)), 3, 7, "fat-tree:k=4", "nccl-tree", 4, 2)
    b = random_pairs_scenario("t", (("x", 4), ("p", 2)), 3, 7, "fat-tree:k=4", "nccl-tree", 4, 2)
    c = random_pairs_scenario("t", (("x", 4), ("p", 2)), 4, 7, "fat-tree:k=4", "nccl-tree", 4, 2)
    assert a == b
    assert a.seed == scenario_seed(7, 0, 3)
    assert (a.jobs[0].placement, a.flows) != (c.jobs[0].placement, c.flows)
    # x = 4 pairs, p = 2 flows each, from 4 distinct job hosts to hosts outside the job
    place = set(a.jobs[0].placement)
    assert len(a.flows) == 8 and len(place) == 8
    srcs = [s for s, _ in a.flows]
    assert set(srcs) <= place and len(set(srcs)) == 4 and all(srcs.count(s) == 2 for s in set(srcs))
    assert not {d for _, d in a.flows} & place


def test_experiment_builds_are_seeded_and_sized():
    cfg = SweepConfig.make(scenarios=2, epochs=10, warmup=2, seed=5)
    for name, exp in EXPERIMENTS.items():
        if name == "fig7":
            continue  # builds the 720-server fabric; covered below on a small one
        one, two = exp.build(cfg), exp.build(cfg)
        assert one == two, name
        assert all(s.epochs == 10 and s.warmup == 2 for s in one)
    assert len(EXPERIMENTS["fig5a"].build(cfg)) == 4 * 3 * 2
    assert len(EXPERIMENTS["fig13"].build(cfg)) == 4 * 3 * 2 * 2
    quick = SweepConfig.make(quick=True)
    assert (quick.scenarios, quick.epochs, quick.warmup) == (2, 30, 10)
    with pytest.raises(ValueError, match="warmup"):
        SweepConfig.make(epochs=10, warmup=10)


def test_shared_nodes_scenario():
    sc = shared_nodes_scenario("fig6", (("shared", 3),), 0, 1, ("nccl-tree", "ring"), 3)
    p1, p2 = (set(j.placement) for j in sc.jobs)
    assert len(p1 & p2) == 3 and len(p1 | p2) == 13
    assert sc.topology == "star:hosts=16" and [a for a, _ in sc.arms] == ["baseline", "react"]
    with pytest.raises(ValueError, match="shared nodes must be in 0..8"):
        shared_nodes_scenario("fig6", (), 0, 1, ("ring", "ring"), 9)


def test_network_sharing_scenario_no_shared_host():
    spec = "alibaba:tors=6,aggs=3,hosts=8"
    sc = network_sharing_scenario("fig7", (), 0, 2, spec, ("ring", "ring"), tors=4)
    topo = topology(spec)
    p1, p2 = (set(j.placement) for j in sc.jobs)
    assert not p1 & p2 and len(p1) == len(p2) == 8
    tors = {next(iter(topo.graph.successors(topo.hosts[h]))) for h in p1 | p2}
    assert tors <= set(dict(sc.extra)["tors"]) and len(dict(sc.extra)["tors"]) == 4
    assert [a for a, _ in sc.arms] == ["baseline", "react-job1", "react-both"]


def test_degraded_scenario_hits_job_paths():
    sc = degraded_scenario("fig8", (), 0, 3, "fat-tree:k=4", "nccl-tree", 30e9, 2)
    topo = topology("fat-tree:k=4")
    assert len(sc.degrade) == 4 and all(r == 30e9 for _, r in sc.degrade)  # 2 cables, both directions
    on_paths = {int(l) for s in sc.jobs[0].placement for d in sc.jobs[0].placement if s != d
                for p in topo.shortest_paths(s, d) for l in p}
    assert {l for l, _ in sc.degrade} & on_paths
    with pytest.raises(ValueError, match="cables must be in"):
        degraded_scenario("fig8", (), 0, 3, "fat-tree:k=4", "nccl-tree", 30e9, 10_000)


# ------------------------------------------------------------------- runner
def test_two_static_arms_are_identical():
    sc = random_pairs_scenario("t", (("x", 2), ("p", 2)), 0, 0, "fat-tree:k=4", "nccl-tree", 2, 2,
                               epochs=6, warmup=2)
    res = run_scenario(dataclasses.replace(sc, arms=STATIC2))
    assert res["improvement"] == {"again": [0.0]}
    assert res["arms"]["baseline"]["epoch_times"] == res["arms"]["again"]["epoch_times"]
    assert len(res["arms"]["baseline"]["epoch_times"]) == 6
    assert res["arms"]["baseline"]["jobs"][0]["epochs"] == 4


def test_congestion_slows_the_baseline_by_hand():
    # star, 2-rank ring AllReduce, 1 MB, 100 Gbps, 2 links of 1 us: chunk A goes 0>1 (reduce) then
    # 1>0 (copy), chunk B 1>0 then 0>1; each flow is 0.5 MB = 4 Mbit. Uncongested every flow takes
    # 2 us + 40 us and each chunk's second flow waits for its first: 84 us.
    # With one external flow into rank 1's host (p = 1): A1 (0>1) gets 50 Gbps; B1 (1>0) arrives at
    # 42 us, when A1 has 4 - 2.1 = 1.9 Mbit left; B2 (0>1) joins, three flows share rank 1's
    # downlink (33.3 Gbps each): A1 sends its rest in 57 us (arrives 42 + 57 + 2 = 101 us) while B2
    # sends 1.9 Mbit; B2's last 2.1 Mbit at 50 Gbps take 42 us: arrival 99 + 42 + 2 = 143 us.
    # A2 (1>0) starts at 101 us and arrives at 143 us too.
    base = random_pairs_scenario("t", (), 0, 0, "star:hosts=3", "ring", 1, 1, ranks=2, message_bytes=1e6,
                                 epochs=2, warmup=0, ecmp_ports=1)
    clean = dataclasses.replace(base, jobs=(dataclasses.replace(base.jobs[0], placement=(0, 1)),), flows=(),
                                arms=STATIC2)
    hot = dataclasses.replace(clean, flows=((2, 1),))
    t_clean = run_scenario(clean)["arms"]["baseline"]["jobs"][0]["mean_time"]
    t_hot = run_scenario(hot)["arms"]["baseline"]["jobs"][0]["mean_time"]
    assert t_clean == pytest.approx(84e-6, rel=1e-9)
    assert t_hot == pytest.approx(143e-6, rel=1e-9)


# ----------------------------------------------------------- pattern views
def test_tree_views_of_nccl_tree():
    p = generate("nccl-tree", 8)
    view = dict(pattern_view(p))
    assert view == {"tree 0": "0(4(2(1 3) 6(5 7)))", "tree 1": "7(3(1(0 2) 5(4 6)))"}
    assert tree_text(np.array([-1, 0, 0]), mark=[2]) == "0(1 [bold red]2[/])"
    assert busiest_receiver(p) == 3


def test_moved_positions_after_chunk_local_swap():
    p = generate("nccl-tree", 8)
    q = p.relabel([0, 1, 3, 2, 4, 5, 6, 7], graph=1)  # swap ranks 2 and 3 in tree 1 only
    assert dict(pattern_view(q))["tree 1"] == "7(2(1(0 3) 5(4 6)))"
    assert moved_positions(p, q) == [{"graph": 1, "position": 2, "ranks": [3]},
                                     {"graph": 1, "position": 3, "ranks": [2]}]
    with pytest.raises(ValueError, match="not relabellings"):
        moved_positions(p, generate("ring", 8))

"""The testbed experiment (REACT §7.2): statistics on hand-made results, and a short
end-to-end run on the emulated cluster (root, iproute2, torch and the REACT controller)."""

import importlib.util
import json
import os

import numpy as np
import pytest

from reactccl.testbed import netns_unavailable
from reactccl.testbed.experiment import (ExperimentConfig, default_victim, format_table,
                                                 run_experiment, summarize)


def _results(times_by_mode, hosts=4, flows=1, victim=1, skip=0, in_before=2.0, in_after=1.0, change_epochs=(2,)):
    # the victim receives in_before of the message in the initial pattern; REACT's changes
    # (at change_epochs) alternate in_after, in_before, in_after, ... (a trial and a revert)
    modes = {m: {"epoch_times": t} for m, t in times_by_mode.items()}
    shares = [in_after if i % 2 == 0 else in_before for i in range(len(change_epochs))]
    if "react" in modes:
        modes["react"].update(changes=len(change_epochs), change_epochs=list(change_epochs),
                              change_in_fraction=[[s if r == victim else 1.0 for r in range(hosts)]
                                                  for s in shares],
                              in_fraction=[shares[-1] if r == victim else 1.0 for r in range(hosts)])
    return {"config": {"skip": skip}, "runs": [{
        "hosts": hosts, "flows": flows, "victim": victim, "modes": modes,
        "in_fraction": [in_before if r == victim else 1.0 for r in range(hosts)]}]}


def test_default_victim_is_busiest_receiver_of_the_tree():
    # nccl-tree on 4 ranks: tree 0 = 1,3 -> 2 -> 0, tree 1 = 0,2 -> 1 -> 3 (reduce up, broadcast
    # down); ranks 1 and 2 each receive two halves up and one half down... = 2.0 of the message,
    # ranks 0 and 3 receive 1.0; the lowest busiest rank is 1.
    assert default_victim("nccl-tree", 4) == 1


def test_summarize_ratios_and_percentiles():
    base = [1.0] * 19 + [3.0]          # mean 1.1, p95 = 1.0 + 0.05*(3.0-1.0)... numpy linear: 1.1
    react = [0.5] * 20                  # mean 0.5, p95 0.5
    row = summarize(_results({"baseline": base, "react": react, "nccl": [0.25] * 20}))[0]
    assert row["baseline_mean"] == pytest.approx(1.1)
    assert row["baseline_p95"] == pytest.approx(np.percentile(base, 95)) == pytest.approx(1.1)
    assert row["speedup_mean"] == pytest.approx(2.2) and row["speedup_p95"] == pytest.approx(2.2)
    assert row["changes"] == 1 and (row["victim_in_before"], row["victim_in_after"]) == (2.0, 1.0)
    # 20 epochs, the change lands at epoch 2: 2 epochs at 2.0, 18 at 1.0 -> mean 1.1
    assert row["victim_in_measured"] == pytest.approx(1.1)
    assert row["nccl_mean"] == pytest.approx(0.25)


def test_victim_share_counts_the_pattern_each_measured_epoch_ran():
    # changes at epochs 3 (victim 2.0 -> 1.0), 6 (trial back to 2.0), 8 (1.0 again);
    # measured epochs 4..9 ran shares 1, 1, 2, 2, 1, 1 -> mean 8/6; the final pattern says 1.0
    res = _results({"baseline": [1.0] * 10, "react": [1.0] * 10}, change_epochs=(3, 6, 8))
    row = summarize(res, skip=4)[0]
    assert row["victim_in_measured"] == pytest.approx(8 / 6) and row["victim_in_after"] == 1.0
    assert summarize(res, skip=0)[0]["victim_in_measured"] == pytest.approx((3 * 2 + 3 + 2 * 2 + 2) / 10)


def test_leaf_of_both_trees_has_fan_in_two_but_receives_half():
    # why the experiment judges the victim by bytes received: in nccl-tree on 4 ranks rank 1
    # is tree 1's inner node (two children in step 0, 2.0 of the message in all); swapping it
    # with a leaf of tree 1 makes it a leaf of both trees: one half-message flow from each tree
    # in step 3 (fan-in still 2) but only 1.0 of the message in all
    from reactccl.algorithms import generate
    from reactccl.testbed.worker import in_fraction
    p = generate("nccl-tree", 4)
    q = p.relabel(np.array([1, 0, 2, 3]), graph=1)
    assert p.degrees()[0][:, 1].tolist() == [2, 0, 1, 1] and in_fraction(p)[1] == 2.0
    assert q.degrees()[0][:, 1].tolist() == [0, 0, 0, 2] and in_fraction(q)[1] == 1.0


def test_summarize_skips_warmup_epochs():
    res = _results({"baseline": [9.0, 9.0, 1.0, 1.0], "react": [9.0, 9.0, 2.0, 2.0]})
    assert summarize(res, skip=2)[0]["speedup_mean"] == pytest.approx(0.5)
    assert summarize(res, skip=0)[0]["speedup_mean"] == pytest.approx(5.0 / 5.5)


def test_format_table_shows_paper_values():
    text = format_table(summarize(_results({"baseline": [1.0, 1.0], "react": [0.8, 0.8]}, flows=2,
                                                change_epochs=(0,))))
    assert "1.250" in text and "1.348/1.145/33.2" in text and "2.00 -> 1.00" in text


def _missing_for_end_to_end():
    if netns_unavailable():
        return netns_unavailable()
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    try:
        from reactccl.tuner import ReactController  # noqa: F401
    except ImportError:
        return "reactccl.tuner.ReactController is not available yet"
    return None


@pytest.mark.netns
@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.skipif(_missing_for_end_to_end() is not None, reason=str(_missing_for_end_to_end()))
def test_react_beats_static_tree_under_congestion(tmp_path, monkeypatch):
    """4 hosts at 200 Mbit/s, 2 MB AllReduce, baseline and REACT interleaved ABAB, p = 0 and 1.

    Under one external flow into the busiest receiver the static tree's epochs take about
    twice as long (the victim's downlink is shared). REACT must move the victim off the
    critical positions, judged by what crosses the congested link: its share of the message
    received, 2.0 as tree 1's inner node, 1.0 at the best placements (a root or leaf of both
    trees), averaged over the measured epochs under the pattern each ran; and it must be
    clearly faster; at p = 0 it may lose only noise. (Fan-in, the most flows it receives in
    one step, is no measure here: a leaf of both trees receives two half-message flows in the
    last step and stays at fan-in 2 — the reason this test once failed with a 1.37 speedup.)
    Statistics use the second ABAB round only (``skip=30``): the first is REACT's learning
    period (its first swap lands at epoch 11-17: batches of 6 plus the 5-epoch delay).
    Seen on this machine: speedup 1.11-1.68 at p = 2, 0.95-1.04 at p = 0. A later trial that
    loses costs about 12 measured epochs: once in CI, with 24 measured epochs, such a trial
    left the speedup at 1.048 (victim share 1.46). The 30 measured epochs weigh one trial less,
    and REACT's decision report is printed so a failure shows which move it trialled.
    """
    monkeypatch.setenv("REACTCCL_TESTBED_DIR", str(tmp_path / "state"))
    cfg = ExperimentConfig(hosts=(4,), flows=(0, 2), rate="200mbit", mbytes=2.0, epochs=30, rounds=2,
                           skip=30, modes=("baseline", "react"), timeout=400)
    cpu0 = os.times()
    res = run_experiment(cfg, tmp_path / "out", progress=lambda s: None)
    cpu1 = os.times()
    rows = {r["flows"]: r for r in summarize(res)}
    print(format_table(list(rows.values())))
    for run in res["runs"]:
        print(f"p = {run['flows']}: REACT's decisions")
        print(run["modes"]["react"].get("report", ""))
    print(f"wall {res['wall_s']:.0f} s, CPU {cpu1.children_user + cpu1.children_system - cpu0.children_user - cpu0.children_system:.0f} s")
    (tmp_path / "summary.json").write_text(json.dumps(rows))
    congested, calm = rows[2], rows[0]
    assert congested["baseline_mean"] > 1.3 * calm["baseline_mean"]     # the congestion is real
    assert congested["changes"] >= 1
    # the victim moved off: over the measured epochs it received at most 3/4 of its initial share
    assert congested["victim_in_measured"] <= 0.75 * congested["victim_in_before"]
    assert congested["speedup_mean"] > 1.05
    assert calm["speedup_mean"] > 0.9                                     # p = 0: noise only

"""The REACT loop (§5.4, Algorithm 1, §6.3) driven by a synthetic executor with injected congestion."""

import json

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.pattern import verify
from reactccl.tuner import ReactController, ReactParams, TunerError, run_baseline, run_react
from reactccl.tuner.synthetic import SyntheticExecutor


class _SlowPositions(SyntheticExecutor):
    """Flows at the given TEN positions (flow indices) are ``factor`` times slower whichever
    ranks run them: congestion no swap can evade, which the estimator cannot know (it predicts
    a pair it has not seen from the pairs and ranks it has)."""

    def __init__(self, positions, **kw):
        super().__init__(**kw)
        self.positions = dict(positions)

    def fct(self, pattern):
        t = super().fct(pattern)
        for f, k in self.positions.items():
            t[f] *= k
        return t


# the present (paper) tuner: Algorithm 1's greedy swaps, one batch mean against 5%
PAPER = dict(search="greedy", verdict="mean", tau_r=0.05)


def _pair(pattern, epochs=60, params=None, **kw):
    base = run_baseline(SyntheticExecutor(**kw), pattern, epochs)
    react = run_react(SyntheticExecutor(**kw), pattern, epochs, params)
    return base, react


def test_steady_congestion_into_a_rank_is_evaded():
    p = generate("nccl-tree", 8)
    base, react = _pair(p, slow_into={3: 3.0}, params=ReactParams(**PAPER))
    assert react.stats(25)["mean_s"] < 0.9 * base.stats(25)["mean_s"]
    first = react.decisions[0]
    assert first.kind == "transform" and first.epoch == 5 and first.effective_epoch == 11   # B=6, L=5
    assert {d["dst"] for d in first.detected} == {3} and {d["kind"] for d in first.detected} == {"steady"}
    sw = first.swaps[0]
    assert sw["node"]["rank"] == 3 and sw["lowers_degree"] and sw["symbol"] == "③"
    assert first.estimated_gain > 1.05 and first.measured_gain > 1.05 and not first.reverted
    # whole pattern: tree 1's chain 12.8 ms -> tree 0's 11.2 ms (test_tuner_estimator has the sums)
    assert first.estimated_epoch_gain == pytest.approx(12.8 / 11.2, rel=1e-3)
    assert first.to_dict()["estimated_epoch_gain"] == first.estimated_epoch_gain
    assert "whole epoch x1.143" in first.summary()
    assert react.in_effect[:11].tolist() == [-1] * 11 and react.in_effect[11] == 0
    assert react.durations[:11].tolist() == base.durations[:11].tolist()   # same pattern until then


def test_every_pattern_verifies_and_ranks_switch_together():
    p = generate("nccl-tree", 8)
    ctrl = ReactController(p, ReactParams(apply_delay=2))
    ex = SyntheticExecutor(slow_into={3: 3.0, 6: 2.0})
    seen = []
    for e in range(60):
        q = ctrl.pattern_for_epoch(e)
        verify(q)
        d = ctrl.observe(ex.run_epoch(q))
        if d is not None:
            assert d.effective_epoch == e + 3
            assert ctrl.pattern_for_epoch(e + 2) == q
            assert ctrl.pattern_for_epoch(e + 3) == d.pattern
            seen.append(d)
    # swaps move ranks, never steps or chunks: flow i stays TEN position i
    assert seen and all(np.array_equal(d.pattern.step, p.step) and np.array_equal(d.pattern.chunk_idx, p.chunk_idx)
                        for d in seen)


def test_a_trial_without_measured_gain_is_reverted():
    p = generate("nccl-tree", 8)
    react = run_react(_SlowPositions({0: 3.0}), p, 60, ReactParams(**PAPER))   # flow 0: 0>1 at step 0 (tree 1)
    reverts = [d for d in react.decisions if d.kind == "revert"]
    assert reverts
    r = reverts[0]
    undone = react.decisions[r.reverts]
    assert undone.reverted and undone.measured_gain is not None and undone.measured_gain < 1.05
    before = react.decisions[r.reverts - 1].pattern if r.reverts > 0 else p
    assert r.pattern == before and r.effective_epoch == r.epoch + 6


def test_no_congestion_no_change():
    p = generate("nccl-tree", 8)
    base, react = _pair(p, epochs=100)
    assert len(react.decisions) == 0
    assert react.durations.tolist() == base.durations.tolist()


def test_erratic_congestion_is_reported_as_erratic():
    p = generate("ring", 8)
    _, react = _pair(p, epochs=40, erratic={2: (0.5, 4.0)}, seed=3, params=ReactParams(**PAPER))
    kinds = {d["kind"] for dec in react.decisions for d in dec.detected}
    assert "erratic" in kinds
    # a ring gets only ① swaps (Table 1)
    assert {s["symbol"] for dec in react.decisions for s in dec.swaps} <= {"①"}
    # every rank of a ring receives once per step: the local search sees that no move helps
    _, local = _pair(p, epochs=40, erratic={2: (0.5, 4.0)}, seed=3)
    assert len(local.decisions) == 0


def test_seeded_runs_repeat_and_logs_serialise():
    p = generate("nccl-tree", 8)
    kw = dict(slow_into={3: 2.5}, erratic={5: (0.3, 3.0)}, noise=0.02, seed=7)
    a = run_react(SyntheticExecutor(**kw), p, 50, ReactParams(seed=4))
    b = run_react(SyntheticExecutor(**kw), p, 50, ReactParams(seed=4))
    assert a.decisions.to_json() == b.decisions.to_json()
    doc = json.loads(a.to_json(after=25))
    assert doc["stats"]["epochs"] == 25 and len(doc["durations_s"]) == 50
    assert "decisions" in doc and doc["params"]["seed"] == 4
    text = a.report(25)
    assert "epochs from 25" in text and ("swap" in text or "no decisions" in text)


def test_limits_and_errors():
    p = generate("nccl-tree", 8)
    _, react = _pair(p, epochs=60, params=ReactParams(A_max=1), slow_into={3: 3.0})
    assert sum(d.kind == "transform" for d in react.decisions) == 1
    ctrl = ReactController(p)
    other = generate("nccl-tree", 8).relabel([1, 0, 2, 3, 4, 5, 6, 7])
    with pytest.raises(TunerError, match="different pattern"):
        ctrl.observe(SyntheticExecutor().run_epoch(other))
    with pytest.raises(ValueError, match="epochs"):
        run_react(SyntheticExecutor(), p, 0)
    with pytest.raises(TypeError, match="run_epoch"):
        run_react(object(), p, 3)


def test_fruitless_exploration_stops_then_is_forced_again():
    # A slow TEN position follows whoever runs it: every trial is reverted.
    # B = 6, L = 5: trial decided at 5 (from 11), reverted at 16 (from 22), trial at 27, reverted
    # at 38 (from 44): E_max = 2 fruitless rounds, so REACT sticks; after E_max batches without
    # exploring (44-49, 50-55) it explores again at 55.
    p = generate("nccl-tree", 8)
    react = run_react(_SlowPositions({0: 3.0}), p, 120, ReactParams(E_max=2, **PAPER))
    got = [(d.kind, d.epoch, d.effective_epoch) for d in react.decisions][:6]
    assert got == [("transform", 5, 11), ("revert", 16, 22), ("transform", 27, 33), ("revert", 38, 44),
                   ("transform", 55, 61), ("revert", 66, 72)]
    assert all(d.kind == "revert" or d.reverted for d in react.decisions[:-1])
    assert react.durations[-1] == react.durations[0]       # nothing helped, nothing was kept


def test_log_names_what_each_rule_compared():
    """A steady flow is shown by its p90, an erratic one by its mean and spread (tuner/detect.py):
    an erratic flow with a high p90 but a low mean must not read as 'faster than its class'."""
    from reactccl.algorithms import generate
    from reactccl.tuner.log import Decision

    d = Decision(5, 11, "transform", generate("ring", 4), detected=[
        {"flow": 3, "step": 0, "src": 3, "dst": 0, "kind": "steady", "p90_bps": 2e9, "mean_bps": 1.8e9,
         "nstd": 0.1, "class_mean_bps": 7e9},
        {"flow": 4, "step": 1, "src": 0, "dst": 1, "kind": "erratic", "p90_bps": 12e9, "mean_bps": 5e9,
         "nstd": 0.9, "class_mean_bps": 9e9}])
    text = d.summary()
    assert "flow 3 step 0 3->0 steady: p90 2.00 Gbps vs class mean 7.00 Gbps" in text
    assert "flow 4 step 1 0->1 erratic: mean 5.00 Gbps (std/mean 0.90) vs class mean 9.00 Gbps" in text


def test_decision_with_no_spread_reads_and_serialises():
    """A trial whose epoch times have no spread has test t = ±inf (tuner/verdict.py): the summary
    says so in words and to_dict writes it as text, so the JSON stays standard."""
    import json

    from reactccl.algorithms import generate
    from reactccl.tuner.log import Decision

    d = Decision(5, 11, "transform", generate("ring", 4), measured_before=1.2, measured_after=1.0, verdict_t=float("inf"),
                 trial_epochs=6)
    assert "no spread in the epoch times: decided by the means" in d.summary()
    assert json.loads(json.dumps(d.to_dict(), allow_nan=False))["verdict_t"] == "+inf"
    d.verdict_t = -2.5
    assert "(test t = -2.50)" in d.summary() and d.to_dict()["verdict_t"] == -2.5

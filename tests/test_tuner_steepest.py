"""Do no harm and search what the tuner learned: noise-aware detection, the LinkModel estimator,
the local search over ①②③, trial verdicts and bans, on hand-built traces."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.pattern import verify
from reactccl.trace import EpochTrace
from reactccl.tuner import Placement, ReactController, ReactParams, Swap, Transform, ViableSwaps, detect_congestion, \
    run_baseline, run_react
from reactccl.tuner.estimate import LinkModel, Observation, mean_concurrency
from reactccl.tuner.steepest import estimated_epoch, local_search
from reactccl.tuner.paths import schedule
from reactccl.tuner.synthetic import SyntheticExecutor
from reactccl.tuner.verdict import trial_verdict
from test_tuner_detect import _chain  # 3 ranks: 0->1, 1->2, then 2 copies to 1 and 0 (steps 0, 1, 2, 2)

S = 1e6
C = 100e9


def _trace(p, fct, epoch=0):
    fct = np.asarray(fct, dtype=float)
    fin, _ = schedule(p, fct)
    return EpochTrace(epoch, p, S, fin - fct, fin, p.flow_bytes(S), float(fin.max()))


# ------------------------------------------------------------------ detection
def test_noise_without_congestion_is_never_detected():
    p = generate("nccl-tree", 8)
    ex = SyntheticExecutor(noise=0.08, seed=5)           # 8% log-normal noise on every flow
    for _ in range(20):
        batch = [ex.run_epoch(p) for _ in range(6)]
        c = detect_congestion(p, batch)
        assert not c.congested.any(), np.flatnonzero(c.congested)
        assert 0.03 < c.noise < 0.15                      # the median flow's spread: the noise floor


def test_a_reported_noise_floor_raises_the_erratic_bar():
    p = generate("ring", 4)
    F = p.num_flows
    traces = []
    for e in range(6):
        fct = np.full(F, 1e-3)
        fct[5] = 1.2e-3 if e % 2 == 0 else 1.8e-3         # nstd 0.2, mean 0.69 of the others
        traces.append(_trace(p, fct, e))
    assert detect_congestion(p, traces).erratic[5]
    for t in traces:
        t.meta["noise_floor"] = 0.05                      # 0.15 + 2 x 0.05 = 0.25 > 0.2
    assert not detect_congestion(p, traces).erratic.any()


def test_a_flow_faster_than_its_class_is_never_congested():
    p = generate("ring", 4)
    F = p.num_flows
    traces = []
    for e in range(6):
        fct = np.full(F, 1e-3)
        fct[3] = 0.5e-3 if e % 2 == 0 else 1.0e-3         # erratic, but faster than its class
        traces.append(_trace(p, fct, e))
    c = detect_congestion(p, traces)
    assert c.nstd[3] > 0.3 and not c.congested.any()


def test_a_slowed_link_is_steady_on_exactly_the_flows_crossing_it():
    p = generate("nccl-tree", 8)
    ex = SyntheticExecutor(slow_into={3: 3.0}, noise=0.03, seed=2)
    batch = [ex.run_epoch(p) for _ in range(6)]
    c = detect_congestion(p, batch)
    assert set(np.flatnonzero(c.steady).tolist()) == set(np.flatnonzero(p.dst == 3).tolist())
    assert not c.erratic.any()


def test_a_much_slower_flow_is_steady_however_noisy_the_executor():
    # Gloo-like noise: every flow's FCT alternates 3x between epochs (noise floor ~0.5); flow 0
    # runs 30x slower than the others in every epoch (a rank whose sends leave 30 ms late)
    p = generate("ring", 4)
    F = p.num_flows
    traces = []
    for e in range(6):
        fct = np.where((np.arange(F) + e) % 2 == 0, 0.5e-3, 1.5e-3)
        fct[0] = 30e-3
        traces.append(_trace(p, fct, e))
    c = detect_congestion(p, traces)
    assert c.noise == pytest.approx(0.5)                  # std/mean of throughputs 1 and 1/3
    # (1 - 0.2) / (1 + 2 x 0.5) = 0.4 of the class mean; a subtracted margin, 1 - 0.2 - 2 x 0.5,
    # is below 0 and would detect nothing
    assert np.flatnonzero(c.steady).tolist() == [0] and not c.erratic.any()


# ------------------------------------------------------------------ estimator
def test_mean_concurrency_by_hand():
    got = mean_concurrency(np.array([0, 0, 1, 1]), np.array([0.0, 1.0, 0.0, 1.0]), np.array([2.0, 3.0, 4.0, 3.0]))
    assert got.tolist() == [1.5, 1.5, 1.5, 2.0]
    assert mean_concurrency(np.array([0]), np.array([1.0]), np.array([1.0])).tolist() == [1.0]


def test_link_model_by_hand():
    # rank 2's receive link carries 2 extra flows: 1->2 runs at C/3; 2's two copies share its
    # send link (C/2 each), the first flow runs alone. t = one chunk at line rate = 80 us.
    p = _chain()
    t = S * 8 / C
    obs = [_trace(p, [t, 3 * t, 2 * t, 2 * t], e) for e in range(3)]
    m = LinkModel(3, [(o.pattern, o.start, o.end, o.flow_bytes) for o in obs])
    assert m.line_rate == pytest.approx(C)
    assert m.pr.tolist() == pytest.approx([0, 0, 2]) and m.ps.tolist() == pytest.approx([0, 0, 0])
    assert m.default_factor == pytest.approx(1.0) and m.concurrency == "time"
    assert m.predict(p, p.flow_bytes(S)) == pytest.approx([t, 3 * t, 2 * t, 2 * t])
    # rank 2 moved to position 0 (① swap 0<->2): it receives once, with 2 extra flows: 3t;
    # the chain is t + t + 3t
    q = p.relabel([2, 1, 0])
    assert m.predict(q, q.flow_bytes(S)) == pytest.approx([t, t, 2 * t, 3 * t])
    assert estimated_epoch(q, m, q.flow_bytes(S)) == pytest.approx(5 * t)
    assert estimated_epoch(p, m, p.flow_bytes(S)) == pytest.approx(6 * t)


def test_a_sender_into_a_congested_receiver_is_not_blamed_for_its_slow_epochs():
    # ring: rank 1 sends only to rank 2, whose receive link carries 2 extra flows (3t); in two
    # of six epochs one flow into 2 is slower still (5t), more than the receive link explains.
    # Counted over rank 1's flows (explained ones as 0 excess) that is no load on 1's send link;
    # over the unexplained flows alone its send link got an extra flow (ps[1] = 1).
    p = generate("ring", 4)
    t = p.flow_bytes(S)[0] * 8 / C
    into2 = np.flatnonzero(p.dst == 2)
    obs = []
    for e in range(6):
        fct = np.full(p.num_flows, t)
        fct[into2] = 3 * t
        if e in (1, 4):
            fct[into2[e % len(into2)]] = 5 * t
        tr = _trace(p, fct, e)
        obs.append((tr.pattern, tr.start, tr.end, tr.flow_bytes))
    m = LinkModel(4, obs)
    assert m.line_rate == pytest.approx(C)
    assert m.ps.tolist() == pytest.approx([0, 0, 0, 0])
    assert m.pr.tolist() == pytest.approx([0, 0, 2, 0])


def test_link_model_from_prepared_observations_is_the_same_model():
    # the controller prepares each epoch once (Observation.of) and refits over the last H: the
    # fit must not depend on which form it was given, to the last bit, zero-byte flows included
    p = generate("nccl-tree", 8)
    ex = SyntheticExecutor(slow_into={3: 2.0}, noise=0.05, seed=4)
    obs = []
    for e in range(4):
        tr = ex.run_epoch(p)
        b = tr.flow_bytes.copy()
        b[e] = 0.0
        obs.append((tr.pattern, tr.start, tr.end, b))
    a = LinkModel(8, obs)
    b = LinkModel(8, [Observation.of(*o) for o in obs])
    for k in ("line_rate", "ps", "pr", "pair_factor", "pair_seen", "default_factor", "error", "concurrency"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    o = Observation.of(*obs[0])
    assert len(o.src) == p.num_flows - 1 and o.rate.tolist() == pytest.approx(
        (obs[0][3] * 8 / (obs[0][2] - obs[0][1]))[obs[0][3] > 0].tolist())


@pytest.mark.parametrize("max_evals", [1, 5])
def test_search_scores_nothing_past_its_budget(monkeypatch, max_evals):
    # candidates are scored a block at a time (candidates.py): a block never holds more than the
    # evaluations left, so the search scores exactly what it counts (none is rejected here)
    from reactccl.tuner import candidates

    rows = []
    orig = candidates.CandidateScorer.score_rows

    def counted(self, S, D, r, *a):
        rows.append(len(r))
        return orig(self, S, D, r, *a)

    monkeypatch.setattr(candidates.CandidateScorer, "score_rows", counted)
    p = generate("nccl-tree", 8)
    ex = SyntheticExecutor(slow_into={3: 3.0})
    m = LinkModel(8, [(o.pattern, o.start, o.end, o.flow_bytes) for o in [ex.run_epoch(p) for _ in range(4)]])
    res = local_search(Placement(p), m, p.flow_bytes(20e6), ViableSwaps(0), max_evals=max_evals, max_moves=1)
    assert res.evals == max_evals and sum(rows) == max_evals


def test_search_finds_the_known_best_move():
    # the loaded rank 2 receives at step 1 (6t); at position 1 it would receive twice (7t), at
    # position 0 once, in parallel with 2->1 (5t): ① 0<->2 is a best move; so is ③ 1<->2 over
    # steps 1..2 (2 sends to 1 at step 1, 1 sends the result to 2 and 0 at step 2: also 5t)
    p = _chain()
    t = S * 8 / C
    obs = [_trace(p, [t, 3 * t, 2 * t, 2 * t], e) for e in range(3)]
    m = LinkModel(3, [(o.pattern, o.start, o.end, o.flow_bytes) for o in obs])
    res = local_search(Placement(p), m, p.flow_bytes(S), ViableSwaps(0))
    assert res.moves[0] in (Swap(Transform.GLOBAL, 0, 2), Swap(Transform.POSITION, 1, 2, 0, 1, 2))
    assert res.est_before == pytest.approx(6 * t) and res.est_after == pytest.approx(5 * t)
    verify(res.placement.pattern)


def test_search_leaves_a_ring_alone_when_no_move_helps():
    # every rank of a ring receives once per step: a loaded receive link costs the same anywhere
    p = generate("ring", 8)
    ex = SyntheticExecutor(slow_into={2: 3.0})
    obs = [ex.run_epoch(p) for _ in range(6)]
    m = LinkModel(8, [(o.pattern, o.start, o.end, o.flow_bytes) for o in obs])
    res = local_search(Placement(p), m, p.flow_bytes(20e6), ViableSwaps(0))
    assert res.moves == [] and res.placement.same_as(Placement(p))


def test_search_moves_the_tree_off_a_loaded_rank_and_verifies():
    p = generate("nccl-tree", 8)
    ex = SyntheticExecutor(slow_into={3: 3.0})
    obs = [ex.run_epoch(p) for _ in range(6)]
    m = LinkModel(8, [(o.pattern, o.start, o.end, o.flow_bytes) for o in obs])
    assert m.concurrency == "step" and m.pr[3] == pytest.approx(2.0, rel=1e-3)
    res = local_search(Placement(p), m, p.flow_bytes(20e6), ViableSwaps(0))
    assert res.gain > 1.1 and len(res.moves) >= 1
    verify(res.placement.pattern)
    # the executor measures a gain too (less than estimated: it slows a rank's flows 3x per
    # flow, the model adds 2 flows to its link, so two flows into rank 3 cost it 6x, the model 4x)
    assert ex.run_epoch(res.placement.pattern).duration < ex.run_epoch(p).duration / 1.1


# ------------------------------------------------------------------ verdicts and bans
def test_trial_verdict_by_hand():
    assert trial_verdict([10.0] * 6, [9.0] * 6, 0.02) == ("keep", np.inf)          # no spread: the sign
    assert trial_verdict([10.0] * 6, [9.9] * 6, 0.02)[0] == "revert"
    prev = [10.0, 10.4, 9.6, 10.2, 9.8, 10.0]
    v, t = trial_verdict(prev, [9.9, 10.3, 9.5, 10.1, 9.7, 9.9], 0.02)
    assert v == "extend" and -2 < t < 2
    assert trial_verdict(prev, [9.9, 10.3, 9.5, 10.1, 9.7, 9.9], 0.02, final=True)[0] == "revert"
    v, t = trial_verdict(prev, [8.0, 8.2, 7.9, 8.1, 8.0, 7.8], 0.02)
    assert v == "keep" and t > 2
    with pytest.raises(ValueError, match="epoch times"):
        trial_verdict([], [1.0], 0.02)


def test_a_trial_needs_a_gain_its_test_can_confirm():
    # 12 epochs of the current pattern at 0.9, 1.1, ... (median 1.0, MAD 0.1: robust cv 0.14826),
    # trials of at most 3 x 6 epochs: z x cv x sqrt(1/12 + 1/18) with z = 2
    from types import SimpleNamespace
    ctrl = ReactController(generate("nccl-tree", 8), ReactParams())
    batch = [SimpleNamespace(duration=1.0)] * 6
    assert ctrl._detectable(batch) == 0.0                    # no spread: any gain is confirmed
    ctrl.current_times.extend([0.9, 1.1] * 6)
    want = 2 * 0.14826 * np.sqrt(1 / 12 + 1 / 18)           # 0.1106
    assert ctrl._detectable(batch) == pytest.approx(want)
    # one hiccup epoch (0.9 -> 9.0): median 1.1, MAD still 0.1 (a std-based cv would be 2.2)
    ctrl.current_times[0] = 9.0
    assert ctrl._detectable(batch) == pytest.approx(2 * 1.4826 * 0.1 / 1.1 * np.sqrt(1 / 12 + 1 / 18))


def test_no_congestion_with_noise_makes_no_change():
    p = generate("nccl-tree", 8)
    kw = dict(noise=0.08, seed=11)
    base = run_baseline(SyntheticExecutor(**kw), p, 120)
    react = run_react(SyntheticExecutor(**kw), p, 120)
    assert len(react.decisions) == 0 and react.durations.tolist() == base.durations.tolist()


def test_a_losing_trial_is_banned_until_the_evidence_changes():
    p = generate("nccl-tree", 8)
    ctrl = ReactController(p, ReactParams(ban_batches=3))
    sw = Swap(Transform.GLOBAL, 0, 3)
    ctrl.bans.append(({sw}, b"key", ((), (3,)), 0))
    assert ctrl._active_bans(((), (3,))) == ({sw}, {b"key"})
    ctrl.batches = 2
    assert ctrl._active_bans(((), (3,)))[0] == {sw}
    assert ctrl._active_bans(((), (4,))) == (set(), set())          # other congestion: lifted
    ctrl.bans.append(({sw}, b"key", ((), (3,)), 0))
    ctrl.batches = 3
    assert ctrl._active_bans(((), (3,))) == (set(), set())          # expired after ban_batches


def test_reverted_moves_are_not_retried_under_the_same_congestion():
    class SlowPositions(SyntheticExecutor):       # slow TEN positions follow whoever runs them
        def fct(self, pattern):
            t = super().fct(pattern)
            t[0] *= 3.0
            t[15] *= 3.0
            return t
    p = generate("nccl-tree", 8)
    react = run_react(SlowPositions(), p, 150)
    trials = [d for d in react.decisions if d.kind == "transform"]
    lost = [d for d in trials if d.reverted]
    assert lost
    keys = [tuple(d.pattern.src.tolist() + d.pattern.dst.tolist()) for d in trials]
    for d in lost:                                                   # a lost placement is not tried again
        i = trials.index(d)
        assert keys[i] not in keys[i + 1:]


def test_local_search_results_verify_on_random_congestion():
    # property: on random congestion (slow receive/send links, noise) every placement the search
    # returns verifies, and the viable sets it leaves describe that placement (their swaps verify)
    rng = np.random.default_rng(8)
    for k in range(12):
        name, n = [("nccl-tree", 8), ("nccl-tree", 5), ("recursive-doubling", 8), ("ring", 6)][k % 4]
        p = generate(name, n)
        slow = {int(r): float(rng.uniform(1.5, 4)) for r in rng.choice(n, 2, replace=False)}
        ex = SyntheticExecutor(slow_into=slow, slow_out={int(rng.integers(n)): 2.0}, noise=0.03, seed=k)
        obs = [ex.run_epoch(p) for _ in range(6)]
        m = LinkModel(n, [(o.pattern, o.start, o.end, o.flow_bytes) for o in obs])
        viable = ViableSwaps(0)
        res = local_search(Placement(p), m, p.flow_bytes(20e6), viable, max_evals=300)
        verify(res.placement.pattern)
        for g in np.unique(res.placement.pattern.flow_graph).tolist():
            s = viable.for_graph(res.placement, g)
            for i in rng.choice(len(s), size=min(5, len(s)), replace=False).tolist() if len(s) else []:
                sw = (Swap(Transform.CHUNK, int(s.a[i]), int(s.b[i]), g) if s.full[i] else
                      Swap(Transform.POSITION, int(s.a[i]), int(s.b[i]), g, int(s.t0[i]), int(s.t1[i])))
                verify(res.placement.apply(sw).pattern)

"""REACT's runtime feedback loop over batches of epochs (§5.4, Algorithm 1, §6.3).

:class:`ReactController` is fed one :class:`EpochTrace` per epoch. After each batch of B epochs of
one pattern it judges a running trial (keep, revert, or run it one more batch), or searches for a
better pattern (:func:`~reactccl.tuner.steepest.local_search`, or Algorithm 1's
:func:`apply_transforms`); a new pattern takes effect ``apply_delay`` epochs later, for every rank
at the same epoch.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..pattern import CollectivePattern
from ..trace import EpochTrace
from .log import Decision, DecisionLog
from .params import ReactParams
from .paths import FctModel
from .detect import Congestion, detect_congestion
from .estimate import LinkModel, Observation
from .steepest import local_search
from .greedy import SearchResult, apply_transforms
from .transforms import Placement, Swap, TunerError, ViableSwaps
from .verdict import trial_verdict

__all__ = ["ReactController"]


class _Trial:
    def __init__(self, decision: Decision, prev: Placement, prev_time: float, swaps: list[Swap],
                 exclude_before: set[int], viable_before: dict, prev_times: list[float],
                 evidence: tuple) -> None:
        self.decision, self.prev, self.prev_time, self.swaps = decision, prev, prev_time, swaps
        self.exclude_before, self.viable_before = exclude_before, viable_before
        self.prev_times, self.times, self.batches, self.evidence = list(prev_times), [], 0, evidence


class ReactController:
    """Decides, batch by batch, which pattern every rank runs (REACT §5.4).

    Args:
        pattern: the initial (verified) pattern; its flows are the TEN positions.
        params: :class:`ReactParams` (defaults: the paper's Table 3 where it has one).

    Use :meth:`pattern_for_epoch` (or :attr:`current_pattern`) to get the pattern of the next
    epoch and :meth:`observe` to feed its trace, in epoch order.

    Batches: B epochs that ran one pattern (epochs between a decision and its effective epoch
    still run the old pattern; they feed the FCT history and, while a trial is pending, the
    old pattern's sample of epoch times, but no batch).

    Exploring: after a batch with congestion detected (:func:`detect_congestion`, noise-aware),
    or after E_max batches without exploration (forced), REACT fits a
    :class:`~reactccl.tuner.estimate.LinkModel` to the H-epoch FCT history and searches
    (:func:`~reactccl.tuner.steepest.local_search`, ``params.search = "local"``) for the placement
    with the lowest estimated epoch time; it is tried when the estimate is (1 + ε) faster and
    the gain is one the trial's test can confirm against the batch's epoch-time spread
    (:meth:`_detectable`), so noise alone never starts a trial. ``search = "greedy"`` runs Algorithm 1 instead.

    Judging a trial (``params.verdict = "test"``): :func:`~reactccl.tuner.verdict.trial_verdict`
    compares the trial's epoch times with the previous pattern's (its last batches and the
    epochs it ran while the switch was pending): keep, revert, or run the trial another batch
    (at most ``max_trial_batches``). ``verdict = "mean"`` is the paper's rule: one batch mean
    against (1 + τ_r). A reverted trial's moves and placement are banned while the congestion
    the model sees (its loaded ranks and the steady-congested ranks) stays the same, and for at
    most ``ban_batches`` batches. After E_max exploratory batches without a kept gain REACT
    stops exploring for E_max batches.

    Raises:
        VerificationError: ``pattern`` is not correct.
    """

    def __init__(self, pattern: CollectivePattern, params: ReactParams | None = None) -> None:
        self.params = params or ReactParams()
        self.rng = np.random.default_rng(self.params.seed)
        self.placement = Placement(pattern)
        self._schedule: list[tuple[int, Placement]] = [(0, self.placement)]
        self.epoch = 0
        self.history: deque[tuple[CollectivePattern, np.ndarray, np.ndarray]] = deque(maxlen=self.params.H)
        # the last H epochs as the link model reads them (prepared once per epoch, refitted per batch)
        self.timings: deque[Observation] = deque(maxlen=self.params.H)
        self.batch: list[EpochTrace] = []
        self.decisions = DecisionLog()
        self.k_t = self.params.K_t
        self.viable = ViableSwaps(self.params.seed)
        self.exclude: set[int] = set()
        self.tabu: set[Swap] = set()
        self.bans: list[tuple[set[Swap], bytes, tuple, int]] = []   # (moves, placement key, evidence, batch)
        self.trial: _Trial | None = None
        self.current_time: float | None = None
        self.current_times: deque[float] = deque(maxlen=3 * self.params.B)
        self.trials = 0
        self.batches = 0
        self.exploring = True
        self.rounds_without_gain = 0
        self.idle_rounds = 0
        self.searches = 0                    # batches that ran the search (for overhead checks)
        self.triggers: list[tuple[int, str]] = []   # (epoch, what started each search)
        self._last_steady: tuple[bytes | None, set[int]] = (None, set())

    # ------------------------------------------------------------------ schedule
    def pattern_for_epoch(self, epoch: int) -> CollectivePattern:
        """The pattern every rank runs at ``epoch`` (decided so far)."""
        pl = self._schedule[0][1]
        for eff, p in self._schedule:
            if eff <= epoch:
                pl = p
        return pl.pattern

    @property
    def settled_through(self) -> int:
        """The last epoch whose pattern no later decision can change: a decision made on the next
        trace (epoch :attr:`epoch`) takes effect ``apply_delay`` epochs after the one that follows it
        (:mod:`reactccl.contract`)."""
        return self.epoch + self.params.apply_delay

    @property
    def current_pattern(self) -> CollectivePattern:
        """The pattern of the next epoch to run."""
        return self.pattern_for_epoch(self.epoch)

    @property
    def original(self) -> CollectivePattern:
        """The initial pattern (the positions)."""
        return self.placement.original

    def _decide(self, epoch: int, placement: Placement, decision: Decision) -> Decision:
        eff = epoch + 1 + self.params.apply_delay
        decision.effective_epoch = eff
        self._schedule = [(e, p) for e, p in self._schedule if e < eff] + [(eff, placement)]
        self.placement = placement
        self.decisions.append(decision)
        return decision

    # ------------------------------------------------------------------- observe
    def observe(self, trace: EpochTrace) -> Decision | None:
        """Feed the trace of the next epoch; returns a decision when one is made.

        Raises:
            TunerError: the trace ran a different pattern than :meth:`pattern_for_epoch` gave.
        """
        e = self.epoch
        want = self.pattern_for_epoch(e)
        got = trace.pattern
        same = got.num_flows == want.num_flows and np.array_equal(got.src, want.src) and np.array_equal(got.dst, want.dst)
        if not same:
            raise TunerError(f"epoch {e}: the trace ran a different pattern than the controller scheduled")
        self.history.append((got, trace.fct, trace.flow_bytes))
        self.timings.append(Observation.of(got, trace.start, trace.end, trace.flow_bytes))
        self.epoch += 1
        if e < self._schedule[-1][0]:
            if self.trial is not None:          # the old pattern still runs: more evidence for the verdict
                self.trial.prev_times.append(float(trace.duration))
            return None          # a decided pattern is not in effect yet: these epochs run the old one
        self.batch.append(trace)
        if len(self.batch) < self.params.B:
            return None
        batch, self.batch = self.batch, []
        self.batches += 1
        return self._after_batch(e, batch)

    # ------------------------------------------------------------- trial verdicts
    def _judge(self, e: int, tr: _Trial, batch: list[EpochTrace]) -> tuple[str, Decision | None]:
        """Verdict on the running trial after one of its batches: ("keep" | "revert" | "extend", decision)."""
        P = self.params
        times = [float(t.duration) for t in batch]
        tr.times += times
        tr.batches += 1
        measured = float(np.mean(tr.times))
        if P.verdict == "mean":
            verdict, stat = ("keep" if tr.prev_time > (1.0 + P.tau_r) * float(np.mean(times)) else "revert"), None
            measured = float(np.mean(times))
        else:
            verdict, stat = trial_verdict(tr.prev_times, tr.times, P.tau_r, P.z,
                                          final=tr.batches >= P.max_trial_batches)
        if verdict == "extend":
            return verdict, None
        self.trial = None
        tr.decision.measured_after = measured
        tr.decision.verdict_t = None if stat is None else float(stat)
        tr.decision.trial_epochs = len(tr.times)
        if verdict == "keep":
            self.current_time = measured
            self.current_times.clear()
            self.current_times.extend(tr.times)
            self.rounds_without_gain = 0
            return verdict, None
        tr.decision.reverted = True
        self.tabu.update(tr.swaps)
        self.bans.append((set(tr.swaps), tr.decision_key, tr.evidence, self.batches))
        self.exclude = tr.exclude_before
        self.viable.restore(tr.viable_before)
        self.current_time = tr.prev_time
        self.current_times.clear()
        self.current_times.extend(tr.prev_times[-self.current_times.maxlen:])
        self.rounds_without_gain += 1
        if self.rounds_without_gain >= P.E_max:
            self.exploring, self.idle_rounds = False, 0
        d = Decision(e, 0, "revert", tr.prev.pattern, measured_before=measured,
                     measured_after=tr.prev_time, reverts=self.decisions.index(tr.decision))
        return verdict, self._decide(e, tr.prev, d)

    def _evidence(self, cong: Congestion | None, model: LinkModel | None) -> tuple:
        """The congestion a ban depends on: the model's loaded ranks (send, receive), or without a
        model the ranks at either end of a steady-congested flow."""
        if model is not None:
            return model.loaded_ranks()
        if cong is None:
            return ()
        pat, hot = self.placement.pattern, np.flatnonzero(cong.steady)
        return (tuple(sorted(set(pat.src[hot].tolist()))), tuple(sorted(set(pat.dst[hot].tolist()))))

    def _active_bans(self, evidence: tuple) -> tuple[set[Swap], set[bytes]]:
        """Moves and placements still banned; bans whose evidence changed or that expired lift."""
        self.bans = [b for b in self.bans if b[2] == evidence and self.batches - b[3] < self.params.ban_batches]
        moves: set[Swap] = set()
        for b in self.bans:
            moves |= b[0]
        return moves, {b[1] for b in self.bans}

    # ---------------------------------------------------------------- batches
    def _after_batch(self, e: int, batch: list[EpochTrace]) -> Decision | None:
        P = self.params
        times = np.array([t.duration for t in batch])
        measured = float(times.mean())
        if self.trial is not None:
            verdict, d = self._judge(e, self.trial, batch)
            if verdict != "keep":
                return d                       # "extend": the trial runs on; "revert": decided
        else:
            self.current_times.extend(times.tolist())
            self.current_time = float(np.mean(self.current_times))
        if not self.exploring:          # stuck after E_max fruitless rounds: wait E_max rounds
            self.idle_rounds += 1
            if self.idle_rounds < P.E_max:
                return None
            self.exploring, self.rounds_without_gain = True, 0
        force = self.idle_rounds >= P.E_max   # E_max rounds (E_max·B epochs) without exploration
        if P.A_max is not None and self.trials >= P.A_max:
            return None
        if P.search == "greedy":
            return self._greedy(e, batch, measured, force)
        return self._local(e, batch, measured, force)

    def _local(self, e: int, batch: list[EpochTrace], measured: float, force: bool) -> Decision | None:
        P = self.params
        pat = self.placement.pattern
        cong = detect_congestion(pat, batch, P.delta1, P.delta2, P.noise_mult)
        key = self.placement.key()
        steady = set(np.flatnonzero(cong.steady).tolist())
        repeated = steady & self._last_steady[1] if self._last_steady[0] == key else set()
        self._last_steady = (key, steady)
        model = LinkModel(self.original.num_ranks, list(self.timings)) if pat.num_flows else None
        loaded = model is not None and any(model.loaded_ranks())
        # evidence of congestion: steady flows in two batches running, or steady flows on a link
        # the model finds loaded, or erratic flows (noise-aware); never the model alone
        if not (repeated or (loaded and steady) or cong.erratic.any()) or pat.num_flows == 0:
            self.idle_rounds += 1
            return None
        self.idle_rounds = 0
        evidence = self._evidence(cong, model)
        banned, banned_keys = self._active_bans(evidence)
        self.searches += 1
        self.triggers.append((e, "erratic" if cong.erratic.any() else
                              "repeated steady" if repeated else "steady on a loaded link"))
        snap = self.viable.snapshot()
        res = local_search(self.placement, model, batch[-1].flow_bytes, self.viable, banned, banned_keys,
                           P.max_moves, max(P.max_evals, P.eval_work // max(pat.num_flows, 1)),
                           estimator=P.estimator_for(pat.num_ranks))
        need = 1.0 + max(P.epsilon, self._detectable(batch))
        if not res.moves or res.gain <= need:
            self.viable.restore(snap)
            self.rounds_without_gain += 1
            if self.rounds_without_gain >= P.E_max:
                self.exploring = False
            return None
        before, after = self.placement, res.placement
        touched = (before.src != after.src) | (before.dst != after.dst)
        moves = [{**sw.to_dict(), "est_after_s": est} for sw, est in zip(res.moves, res.estimates)]
        d = Decision(e, 0, "transform", after.pattern, detected=_detected(pat, cong), swaps=moves,
                     tried=res.evals, positions_before=before.position_map(touched),
                     positions_after=after.position_map(touched), estimated_gain=res.gain,
                     estimated_epoch_gain=res.gain, measured_before=measured)
        self._start_trial(d, res.moves, snap, evidence, after)
        return self._decide(e, after, d)

    def _detectable(self, batch: list[EpochTrace]) -> float:
        """The smallest relative gain the trial's test can confirm: z x the coefficient of
        variation of the current pattern's epoch times (those kept for the verdict, the batch
        when none are) x sqrt(1/n_prev + 1/n_trial), with n_prev their number and n_trial the
        most epochs a trial may run. A smaller
        estimated gain is not tried: noise alone never starts a trial, and a trial the test
        could not tell from noise would be judged by its sign only."""
        P = self.params
        times = np.array(list(self.current_times) or [t.duration for t in batch])
        med = float(np.median(times)) if len(times) else 0.0
        if len(times) < 2 or med <= 0:
            return 0.0
        # the spread as a robust coefficient of variation (1.4826 MAD / median): one hiccup
        # epoch (the first epoch of a new pattern on real ranks, a descheduled process) is
        # not the noise a trial must beat
        cv = 1.4826 * float(np.median(np.abs(times - med))) / med
        return P.z * cv * float(np.sqrt(1.0 / len(times) + 1.0 / (P.B * P.max_trial_batches)))

    def _start_trial(self, d: Decision, swaps: list[Swap], viable_before: dict, evidence: tuple,
                     after: Placement) -> None:
        prev = list(self.current_times) or [d.measured_before]
        self.trial = _Trial(d, self.placement, float(np.mean(prev)), list(swaps), set(self.exclude),
                            viable_before, prev, evidence)
        self.trial.decision_key = after.key()
        self.trials += 1

    def _greedy(self, e: int, batch: list[EpochTrace], measured: float, force: bool) -> Decision | None:
        P = self.params
        model = FctModel(self.original.num_ranks, list(self.history))
        exclude = set(self.exclude)
        viable_before = self.viable.snapshot()
        res = apply_transforms(self.placement, batch, model, P, self.k_t, self.viable, exclude, self.tabu,
                               self.rng, force=force)
        if not res.explored:
            self.idle_rounds += 1
            return None
        self.idle_rounds = 0
        self.k_t += P.K_growth
        if not res.changed:
            self.rounds_without_gain += 1
            if self.rounds_without_gain >= P.E_max:
                self.exploring = False
            return None
        d = self._transform_decision(e, res, measured)
        evidence = self._evidence(res.congestion, None)
        self._start_trial(d, [a.swap for a in res.accepted], viable_before, evidence, res.placement)
        self.trial.exclude_before = set(self.exclude)
        self.exclude = exclude
        return self._decide(e, res.placement, d)

    def _transform_decision(self, e: int, res: SearchResult, measured: float) -> Decision:
        before, after = self.placement, res.placement
        touched = (before.src != after.src) | (before.dst != after.dst)
        return Decision(e, 0, "transform", after.pattern, detected=_detected(before.pattern, res.congestion),
                        swaps=[a.to_dict() for a in res.accepted], tried=res.tried,
                        positions_before=before.position_map(touched), positions_after=after.position_map(touched),
                        estimated_gain=res.est_before / res.est_after if res.est_after > 0 else None,
                        estimated_epoch_gain=res.epoch_before / res.epoch_after if res.epoch_after > 0 else None,
                        measured_before=measured)


def _detected(pat: CollectivePattern, cong: Congestion | None) -> list[dict]:
    """The congested flows of a batch, as the decision log lists them."""
    if cong is None:
        return []
    return [{"flow": int(f), "step": int(pat.step[f]), "src": int(pat.src[f]), "dst": int(pat.dst[f]),
             "kind": cong.kind(int(f)), "p90_bps": float(cong.p90[f]), "mean_bps": float(cong.mean[f]),
             "nstd": float(cong.nstd[f]), "class_mean_bps": float(cong.degree_mean[f])}
            for f in np.flatnonzero(cong.congested)]

"""REACT's runtime feedback loop over batches of epochs (§5.4, Algorithm 1, §6.3).

:class:`ReactController` is fed one :class:`EpochTrace` per epoch. After each batch of B epochs of
one pattern it either reverts a trial that did not pay off, or searches for swaps
(:func:`apply_transforms`); a new pattern takes effect ``apply_delay`` epochs later, for every
rank at the same epoch.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..pattern import CollectivePattern
from ..trace import EpochTrace
from .log import Decision, DecisionLog
from .params import ReactParams
from .paths import FctModel
from .search import SearchResult, apply_transforms
from .transforms import Placement, Swap, TunerError, ViableSwaps

__all__ = ["ReactController"]


class _Trial:
    def __init__(self, decision: Decision, prev: Placement, prev_time: float, swaps: list[Swap],
                 exclude_before: set[int], viable_before: dict) -> None:
        self.decision, self.prev, self.prev_time, self.swaps = decision, prev, prev_time, swaps
        self.exclude_before, self.viable_before = exclude_before, viable_before


class ReactController:
    """Decides, batch by batch, which pattern every rank runs (REACT §5.4).

    Args:
        pattern: the initial (verified) pattern; its flows are the TEN positions.
        params: :class:`ReactParams` (defaults: the paper's Table 3).

    Use :meth:`pattern_for_epoch` (or :attr:`current_pattern`) to get the pattern of the next
    epoch and :meth:`observe` to feed its trace, in epoch order.

    Batches: B epochs that ran one pattern (epochs between a decision and its effective epoch
    still run the old pattern; they feed the FCT history but no batch). After a trial pattern's
    batch, REACT keeps it if its mean epoch time beats the previous pattern's by (1 + τ_r), else
    reverts (the reverted swaps become tabu and new transforms are tried on the restored pattern
    after its next batch). After E_max exploratory batches without a kept gain it stops
    exploring; after E_max batches without exploration it explores once, even with no congestion
    detected (forced exploration). A steady-congested rank moved by a kept swap is not swapped
    back in.

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
        self.batch: list[EpochTrace] = []
        self.decisions = DecisionLog()
        self.k_t = self.params.K_t
        self.viable = ViableSwaps(self.params.seed)
        self.exclude: set[int] = set()
        self.tabu: set[Swap] = set()
        self.trial: _Trial | None = None
        self.current_time: float | None = None
        self.trials = 0
        self.exploring = True
        self.rounds_without_gain = 0
        self.idle_rounds = 0

    # ------------------------------------------------------------------ schedule
    def pattern_for_epoch(self, epoch: int) -> CollectivePattern:
        """The pattern every rank runs at ``epoch`` (decided so far)."""
        pl = self._schedule[0][1]
        for eff, p in self._schedule:
            if eff <= epoch:
                pl = p
        return pl.pattern

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
        self.epoch += 1
        if e < self._schedule[-1][0]:
            return None          # a decided pattern is not in effect yet: these epochs run the old one
        self.batch.append(trace)
        if len(self.batch) < self.params.B:
            return None
        batch, self.batch = self.batch, []
        return self._after_batch(e, batch)

    def _after_batch(self, e: int, batch: list[EpochTrace]) -> Decision | None:
        P = self.params
        measured = float(np.mean([t.duration for t in batch]))
        if self.trial is not None:
            tr, self.trial = self.trial, None
            tr.decision.measured_after = measured
            if tr.prev_time > (1.0 + P.tau_r) * measured:
                self.current_time = measured
                self.rounds_without_gain = 0
            else:
                tr.decision.reverted = True
                self.tabu.update(tr.swaps)
                self.exclude = tr.exclude_before
                self.viable.restore(tr.viable_before)
                self.current_time = tr.prev_time
                self.rounds_without_gain += 1
                if self.rounds_without_gain >= P.E_max:
                    self.exploring, self.idle_rounds = False, 0
                d = Decision(e, 0, "revert", tr.prev.pattern, measured_before=measured,
                             measured_after=tr.prev_time, reverts=self.decisions.index(tr.decision))
                return self._decide(e, tr.prev, d)
        else:
            self.current_time = measured
        if not self.exploring:          # stuck after E_max fruitless rounds: wait E_max rounds
            self.idle_rounds += 1
            if self.idle_rounds < P.E_max:
                return None
            self.exploring, self.rounds_without_gain = True, 0
        force = self.idle_rounds >= P.E_max   # E_max rounds (E_max·B epochs) without exploration
        if P.A_max is not None and self.trials >= P.A_max:
            return None
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
        self.trial = _Trial(d, self.placement, measured, [a.swap for a in res.accepted],
                            set(self.exclude), viable_before)
        self.exclude = exclude
        self.trials += 1
        return self._decide(e, res.placement, d)

    def _transform_decision(self, e: int, res: SearchResult, measured: float) -> Decision:
        before, after = self.placement, res.placement
        touched = np.zeros(before.original.num_flows, dtype=bool)
        touched |= (before.src != after.src) | (before.dst != after.dst)
        cong, pat = res.congestion, before.pattern
        detected = [{"flow": int(f), "step": int(pat.step[f]), "src": int(pat.src[f]), "dst": int(pat.dst[f]),
                     "kind": cong.kind(int(f)), "p90_bps": float(cong.p90[f]),
                     "class_mean_bps": float(cong.degree_mean[f])}
                    for f in np.flatnonzero(cong.congested)] if cong is not None else []
        return Decision(e, 0, "transform", after.pattern, detected=detected,
                        swaps=[a.to_dict() for a in res.accepted], tried=res.tried,
                        positions_before=before.position_map(touched), positions_after=after.position_map(touched),
                        estimated_gain=res.est_before / res.est_after if res.est_after > 0 else None,
                        estimated_epoch_gain=res.epoch_before / res.epoch_after if res.epoch_after > 0 else None,
                        measured_before=measured)

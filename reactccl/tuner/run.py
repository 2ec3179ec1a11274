"""Driving an executor with REACT (or without it, for the baseline) for a number of epochs.

Any object with ``run_epoch(pattern) -> EpochTrace`` works: the simulator
(``reactccl.netsim.SimulatedCluster``) or real ranks (``reactccl.runtime``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..lookahead import tell_ahead
from ..pattern import CollectivePattern
from ..trace import EpochTrace, format_rate, format_time
from .controller import ReactController
from .log import DecisionLog
from .params import ReactParams

__all__ = ["Executor", "ReactRun", "run_react", "run_baseline"]


class Executor(Protocol):
    """Runs one epoch of a pattern and times its flows."""

    def run_epoch(self, pattern: CollectivePattern) -> EpochTrace: ...


@dataclass
class ReactRun:
    """Per-epoch results of a run.

    Attributes:
        durations: epoch (collective) times in s, shape ``(E,)``.
        algbw, busbw: bytes/s per epoch, shape ``(E,)``.
        decisions: REACT's decision log (empty for a baseline).
        in_effect: index of the decision whose pattern ran at each epoch (-1: the initial pattern).
        slowest: the slowest flows of the last epoch (``EpochTrace.slowest``).
        params: the parameters (None for a baseline).
    """

    durations: np.ndarray
    algbw: np.ndarray
    busbw: np.ndarray
    decisions: DecisionLog
    in_effect: np.ndarray
    slowest: list[dict[str, Any]] = field(default_factory=list)
    params: ReactParams | None = None

    def stats(self, after: int = 0) -> dict[str, float]:
        """Mean, p50, p95 epoch time (s) and mean algbw/busbw (bytes/s) of epochs ``>= after``.

        Raises:
            ValueError: ``after`` not an integer >= 0, or no epochs at or after it.
        """
        if isinstance(after, bool) or not isinstance(after, (int, np.integer)) or after < 0:
            raise ValueError(f"stats: after must be an epoch index >= 0, got {after!r}")
        d = self.durations[after:]
        if not d.size:
            raise ValueError(f"stats: no epochs at or after {after} (run has {len(self.durations)})")
        return {"epochs": int(d.size), "mean_s": float(d.mean()), "p50_s": float(np.percentile(d, 50)),
                "p95_s": float(np.percentile(d, 95)), "algbw_Bps": float(self.algbw[after:].mean()),
                "busbw_Bps": float(self.busbw[after:].mean())}

    def to_dict(self, after: int = 0) -> dict[str, Any]:
        """JSON-ready summary with the decision log."""
        return {"stats": self.stats(after), "durations_s": self.durations.tolist(),
                "algbw_Bps": self.algbw.tolist(), "in_effect": self.in_effect.tolist(),
                "decisions": [d.to_dict() for d in self.decisions], "slowest": self.slowest,
                "params": None if self.params is None else self.params.to_dict()}

    def to_json(self, after: int = 0, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON."""
        return json.dumps(self.to_dict(after), indent=indent)

    def report(self, after: int = 0) -> str:
        """Readable text: epoch-time figures and the decision log."""
        s = self.stats(after)
        kept = sum(d.kind == "transform" and not d.reverted for d in self.decisions)
        reverts = sum(d.kind == "revert" for d in self.decisions)
        head = (f"{s['epochs']} epochs from {after}: mean {format_time(s['mean_s'])}, p50 {format_time(s['p50_s'])}, "
                f"p95 {format_time(s['p95_s'])}, algbw {format_rate(s['algbw_Bps'])}; "
                f"{len(self.decisions)} decisions ({kept} kept, {reverts} reverts)")
        return head + ("\n" + self.decisions.report() if self.decisions else "")


def _drive(executor: Executor, epochs: int, pattern_of: Callable[[int], CollectivePattern],
           observe: Callable[[EpochTrace], Any] | None, progress: Callable[[int, int], Any] | None,
           settled: Callable[[], int] = lambda: 1 << 62):
    if not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs: expected an integer >= 1, got {epochs!r}")
    if not callable(getattr(executor, "run_epoch", None)):
        raise TypeError(f"executor: {type(executor).__name__} has no run_epoch(pattern) method")
    dur, alg, bus, last = np.zeros(epochs), np.zeros(epochs), np.zeros(epochs), None
    for e in range(epochs):
        tell_ahead(executor, pattern_of, e, settled(), epochs)
        trace = executor.run_epoch(pattern_of(e))
        dur[e], alg[e], bus[e], last = trace.duration, trace.algbw, trace.busbw, trace
        if observe is not None:
            observe(trace)
        if progress is not None:
            progress(e + 1, epochs)
    return dur, alg, bus, last


def run_react(executor: Executor, pattern: CollectivePattern, epochs: int, params: ReactParams | None = None,
              progress: Callable[[int, int], Any] | None = None) -> ReactRun:
    """Run ``epochs`` epochs of ``pattern`` on ``executor`` with REACT tuning it.

    Args:
        progress: called as ``progress(done, epochs)`` after every epoch.

    Raises:
        ValueError, TypeError: bad ``epochs`` or an executor without ``run_epoch``.
    """
    ctrl = ReactController(pattern, params)
    in_effect = np.full(epochs, -1)

    def pattern_of(e: int) -> CollectivePattern:
        idx = [i for i, d in enumerate(ctrl.decisions) if d.effective_epoch <= e]
        in_effect[e] = idx[-1] if idx else -1
        return ctrl.pattern_for_epoch(e)

    dur, alg, bus, last = _drive(executor, epochs, pattern_of, ctrl.observe, progress,
                                 lambda: ctrl.settled_through)
    return ReactRun(dur, alg, bus, ctrl.decisions, in_effect, last.slowest() if last else [], ctrl.params)


def run_baseline(executor: Executor, pattern: CollectivePattern, epochs: int,
                 progress: Callable[[int, int], Any] | None = None) -> ReactRun:
    """Run ``epochs`` epochs of the fixed ``pattern`` (no REACT), for comparison."""
    dur, alg, bus, last = _drive(executor, epochs, lambda e: pattern, None, progress)
    return ReactRun(dur, alg, bus, DecisionLog(), np.full(epochs, -1), last.slowest() if last else [], None)

"""Driving an executor with REACT (or without it, for the baseline) for a number of epochs.

Any :class:`~reactccl.contract.Executor` works: the simulator (``reactccl.netsim.SimulatedCluster``),
the packet engine, or real ranks (``reactccl.runtime.RealExecutor``); the loop is
:func:`reactccl.contract.drive`, with a :class:`ReactController` or a
:class:`~reactccl.contract.StaticController`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..contract import Drive, Executor, StaticController, drive
from ..pattern import CollectivePattern
from ..trace import EpochTrace, format_rate, format_time
from .controller import ReactController
from .log import DecisionLog
from .params import ReactParams

__all__ = ["Executor", "ReactRun", "run_react", "run_baseline"]


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


def run_react(executor: Executor, pattern: CollectivePattern, epochs: int, params: ReactParams | None = None,
              progress: Callable[[int, int], Any] | None = None) -> ReactRun:
    """Run ``epochs`` epochs of ``pattern`` on ``executor`` with REACT tuning it.

    Args:
        progress: called as ``progress(done, epochs)`` after every epoch.

    Raises:
        ValueError, TypeError: bad ``epochs`` or an executor without ``run_epoch``.
    """
    ctrl = ReactController(pattern, params)
    run = Drive([ctrl], epochs, executor=executor)
    in_effect = np.full(run.epochs, -1)

    def after(e: int, traces: list[EpochTrace]) -> None:
        # decisions made while observing epoch e take effect after it, so this is the one that ran
        idx = [i for i, d in enumerate(ctrl.decisions) if d.effective_epoch <= e]
        in_effect[e] = idx[-1] if idx else -1
        if progress is not None:
            progress(e + 1, epochs)

    return _run(run.run(after), ctrl.decisions, in_effect, ctrl.params)


def run_baseline(executor: Executor, pattern: CollectivePattern, epochs: int,
                 progress: Callable[[int, int], Any] | None = None) -> ReactRun:
    """Run ``epochs`` epochs of the fixed ``pattern`` (no REACT), for comparison.

    Raises:
        ValueError, TypeError: bad ``epochs`` or an executor without ``run_epoch``.
    """
    done = drive(executor, StaticController(pattern), epochs,
                 None if progress is None else (lambda e, traces: progress(e + 1, epochs)))
    return _run(done, DecisionLog(), np.full(epochs, -1), None)


def _run(done: Drive, decisions: DecisionLog, in_effect: np.ndarray, params: ReactParams | None) -> ReactRun:
    """The :class:`ReactRun` of a finished one-job drive."""
    last = done.traces[0] if done.traces else None
    return ReactRun(done.durations[:, 0], done.algbw[:, 0], done.busbw[:, 0], decisions, in_effect,
                    last.slowest() if last else [], params)

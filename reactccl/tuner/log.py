"""REACT's decision log: what was detected, which swaps were made and why, and what they gave."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..pattern import CollectivePattern
from ..trace import format_time

__all__ = ["Decision", "DecisionLog"]


@dataclass
class Decision:
    """One change of the pattern every rank runs.

    Attributes:
        epoch: the last epoch observed before deciding.
        effective_epoch: first epoch that runs ``pattern`` (same for all ranks).
        kind: "transform" (new swaps) or "revert" (back to the previous pattern).
        pattern: the pattern decided (verified).
        detected: congested flows of the batch: flow, step, src, dst, kind, p90, mean and class mean
            (bit/s), nstd (std / mean of its throughput).
        swaps: accepted swaps with their node, degree effect and estimated path times (s).
        tried: swaps evaluated by the estimator.
        positions_before, positions_after: position → rank of the flows the swaps touched
            (keys ``"g<graph> t<step> p<position>"``, position = rank label in the original pattern).
        estimated_gain: estimated old-critical-path time before / after (> 1 is faster).
        estimated_epoch_gain: estimated epoch time (whole pattern, longest dependency chain)
            before / after; a trial is emitted only when it is > 1 + ε.
        measured_before: mean epoch time (s) of the batch that led to this decision (for a revert:
            the trial's batch).
        measured_after: mean epoch time (s) of the first batch that ran ``pattern`` (None until
            then; for a revert: the restored pattern's last measured batch).
        reverted: this trial was undone because it did not gain (1 + τ_r).
        reverts: for kind "revert", the index of the decision it undid.
        verdict_t: the keep/revert test statistic of a trial (> 0 favours keeping; see
            :class:`~reactccl.tuner.controller.ReactController`), None for the mean rule;
            ±inf when both samples have no spread (decided by the means; :meth:`to_dict` writes
            it as the text ``"+inf"``/``"-inf"``, so the JSON stays standard).
        trial_epochs: epochs the trial ran before its verdict.
    """

    epoch: int
    effective_epoch: int
    kind: str
    pattern: CollectivePattern
    detected: list[dict[str, Any]] = field(default_factory=list)
    swaps: list[dict[str, Any]] = field(default_factory=list)
    tried: int = 0
    positions_before: dict[str, list[int]] = field(default_factory=dict)
    positions_after: dict[str, list[int]] = field(default_factory=dict)
    estimated_gain: float | None = None
    estimated_epoch_gain: float | None = None
    measured_before: float | None = None
    measured_after: float | None = None
    reverted: bool = False
    reverts: int | None = None
    verdict_t: float | None = None
    trial_epochs: int = 0

    @property
    def measured_gain(self) -> float | None:
        """measured_before / measured_after (> 1 is faster), once measured."""
        if self.measured_before is None or self.measured_after is None or self.measured_after <= 0:
            return None
        return self.measured_before / self.measured_after

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the pattern as its flows' src/dst lists)."""
        return {"epoch": self.epoch, "effective_epoch": self.effective_epoch, "kind": self.kind,
                "detected": self.detected, "swaps": self.swaps, "tried": self.tried,
                "positions_before": self.positions_before, "positions_after": self.positions_after,
                "estimated_gain": self.estimated_gain, "estimated_epoch_gain": self.estimated_epoch_gain,
                "measured_before_s": self.measured_before,
                "measured_after_s": self.measured_after, "measured_gain": self.measured_gain,
                "reverted": self.reverted, "reverts": self.reverts, "verdict_t": _json_t(self.verdict_t),
                "trial_epochs": self.trial_epochs,
                "pattern": {"src": self.pattern.src.tolist(), "dst": self.pattern.dst.tolist()}}

    def summary(self) -> str:
        """One paragraph of plain text."""
        head = f"epoch {self.epoch} -> from epoch {self.effective_epoch}: {self.kind}"
        if self.kind == "revert":
            return (f"{head} of decision {self.reverts} (trial measured {_t(self.measured_before)} vs the "
                    f"previous pattern's {_t(self.measured_after)}: not better by (1 + tau_r))")
        lines = [head]
        steady = sum(d["kind"] == "steady" for d in self.detected)
        lines.append(f"  detected {len(self.detected)} congested flows ({steady} steady, "
                     f"{len(self.detected) - steady} erratic)")
        for d in self.detected[:6]:
            # what the rule compared (tuner/detect.py): a steady flow's p90, an erratic flow's mean and spread
            if d["kind"] == "erratic" and "mean_bps" in d:
                what = f"mean {d['mean_bps'] / 1e9:.2f} Gbps (std/mean {d['nstd']:.2f})"
            else:
                what = f"p90 {d['p90_bps'] / 1e9:.2f} Gbps"
            lines.append(f"    flow {d['flow']} step {d['step']} {d['src']}->{d['dst']} {d['kind']}: "
                         f"{what} vs class mean {d['class_mean_bps'] / 1e9:.2f} Gbps")
        if len(self.detected) > 6:
            lines.append(f"    ... {len(self.detected) - 6} more")
        for s in self.swaps:
            win = f" steps {s['t0']}..{s['t1']}" if s["t0"] is not None else ""
            g = f" graph {s['graph']}" if s["graph"] is not None else ""
            if "node" not in s:           # a local-search move: estimated epoch time after it
                lines.append(f"  {s['symbol']} swap {s['a']}<->{s['b']}{g}{win}: estimated epoch "
                             f"{_t(s['est_after_s'])}")
                continue
            lines.append(f"  {s['symbol']} swap {s['a']}<->{s['b']}{g}{win} for {s['node']['kind']} node "
                         f"(rank {s['node']['rank']}, step {s['node']['step']})"
                         f"{', lowers its degree' if s['lowers_degree'] else ''}: estimated "
                         f"{_t(s['est_before_s'])} -> {_t(s['est_after_s'])}")
        gain = f"estimated gain x{self.estimated_gain:.3f}" if self.estimated_gain else ""
        if self.estimated_epoch_gain:
            gain += f" (whole epoch x{self.estimated_epoch_gain:.3f})"
        meas = f", measured x{self.measured_gain:.3f}" if self.measured_gain else ""
        if self.verdict_t is not None:
            t = self.verdict_t
            test = f"test t = {t:+.2f}" if np.isfinite(t) else "no spread in the epoch times: decided by the means"
            meas += f" over {self.trial_epochs} epochs ({test})"
        lines.append(f"  {gain}{meas} ({self.tried} swaps tried){'; REVERTED' if self.reverted else ''}")
        return "\n".join(lines)


def _json_t(t: float | None) -> float | str | None:
    """A test statistic for JSON: ±inf as text (``json`` would write ``Infinity``, not JSON)."""
    return t if t is None or np.isfinite(t) else ("+inf" if t > 0 else "-inf")


def _t(x: float | None) -> str:
    return "?" if x is None else format_time(x)


class DecisionLog(list):
    """The decisions of one run, in order (a list of :class:`Decision`)."""

    def to_json(self, indent: int | None = 2) -> str:
        """All decisions as a JSON array."""
        return json.dumps([d.to_dict() for d in self], indent=indent)

    def report(self) -> str:
        """Readable text: one paragraph per decision."""
        if not self:
            return "no decisions: the pattern was never changed"
        return "\n".join(f"[{i}] {d.summary()}" for i, d in enumerate(self))

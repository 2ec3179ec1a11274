"""Congestion detection from flow completion times only (REACT §5.2).

No topology or link capacity is used: each flow is compared with the flows of the same TEN
degree in the same pattern (steady congestion, Eq. 1) and with itself across the batch
(erratic congestion, Eq. 2).

Two rules keep measurement noise from reading as congestion (the paper's Eq. 2 has neither):
a flow whose mean throughput is at or above its class mean is never congested (it is not the
one being held back), an erratic flow must also be slower than its class on average by δ2 (a
spread around a rate near the class's is noise, not a link that keeps failing it), and "erratic" is judged against the executor's noise floor: the larger
of a floor the executor reports (``EpochTrace.meta["noise_floor"]``, a relative std of one
flow's throughput with no congestion) and the median normalised std of the batch's flows (most
flows of a job are not congested, so their spread is the executor's own noise). A flow is
erratic only when its spread exceeds ``delta2`` *plus* ``noise_mult`` times that floor, and
steady only when its p90 is below ``(1 - delta1) / (1 + noise_mult x floor)`` of its class
mean (on a noisy executor, e.g. Gloo processes on a busy host, a flow that is merely often
slower than its class is not a congested link). The margin divides: however large the floor,
a flow many times slower than its class is still steady (a subtracted margin went below 0 at
a floor of 0.4, usual for small Gloo messages, and hid a rank 30x slower than the others).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..pattern import CollectivePattern
from ..trace import EpochTrace

__all__ = ["Congestion", "detect_congestion", "noise_floor", "throughput_matrix"]


@dataclass(frozen=True)
class Congestion:
    """Per-flow detection result for one batch, arrays of shape ``(F,)``.

    Attributes:
        steady: Eq. 1 holds: p90 of the flow's throughput < (1 - δ1) x the mean throughput of
            all flows of the same degree.
        erratic: Eq. 2 holds: std / mean of the flow's throughput > δ2.
        p90, mean, nstd: the flow's p90 and mean throughput (bit/s) and normalised std.
        degree_mean: the mean throughput (bit/s) of the flow's degree class.
        degree: the flow's TEN degree (``CollectivePattern.flow_degree``).
        noise: the noise floor used for Eq. 2 (relative std, see the module docstring).
    """

    steady: np.ndarray
    erratic: np.ndarray
    p90: np.ndarray
    mean: np.ndarray
    nstd: np.ndarray
    degree_mean: np.ndarray
    degree: np.ndarray
    noise: float = 0.0

    @property
    def congested(self) -> np.ndarray:
        """Flows that are steady or erratic congested, shape ``(F,)``."""
        return self.steady | self.erratic

    def kind(self, f: int) -> str:
        """"steady", "erratic" or "none" for flow ``f`` (steady wins when both hold)."""
        return "steady" if self.steady[f] else ("erratic" if self.erratic[f] else "none")


def throughput_matrix(traces: Sequence[EpochTrace]) -> np.ndarray:
    """Per-flow throughput (bit/s, bytes x 8 / FCT) of each trace, shape ``(len(traces), F)``.

    Raises:
        ValueError: no traces, or traces of patterns with different flow counts.
    """
    if not traces:
        raise ValueError("throughput_matrix: no traces")
    F = traces[0].pattern.num_flows
    bad = [t.epoch for t in traces if t.pattern.num_flows != F]
    if bad:
        raise ValueError(f"throughput_matrix: epochs {bad[:4]} ran a pattern with a different flow count")
    return np.stack([t.throughput for t in traces])


def noise_floor(traces: Sequence[EpochTrace], nstd: np.ndarray | None = None) -> float:
    """The executor's measurement noise as a relative std of one flow's throughput: the largest
    ``meta["noise_floor"]`` the traces report, or the median normalised std of the live flows
    over the batch (``nstd``, computed when not given), whichever is larger."""
    reported = max((float(t.meta.get("noise_floor", 0.0) or 0.0) for t in traces), default=0.0)
    if nstd is None:
        tp = throughput_matrix(traces)
        m = tp.mean(axis=0)
        nstd = np.divide(tp.std(axis=0), m, out=np.zeros_like(m), where=m > 0)[traces[-1].flow_bytes > 0]
    med = float(np.median(nstd)) if len(nstd) else 0.0
    return max(reported, med)


def detect_congestion(pattern: CollectivePattern, traces: Sequence[EpochTrace], delta1: float = 0.2,
                      delta2: float = 0.15, noise_mult: float = 2.0) -> Congestion:
    """Classify every flow of ``pattern`` from a batch of traces that ran it (§5.2).

    Args:
        pattern: the pattern the traces ran (its degrees define the comparison classes).
        traces: the batch (B epochs).
        delta1, delta2: thresholds of Eq. 1 and Eq. 2.
        noise_mult: Eq. 2 needs ``nstd > delta2 + noise_mult x`` :func:`noise_floor`, Eq. 1
            ``p90 < (1 - delta1) / (1 + noise_mult x floor) x`` the class mean.

    Flows that carry no bytes, and flows whose mean throughput is at least their class mean,
    are never congested.
    """
    tp = throughput_matrix(traces)
    if tp.shape[1] != pattern.num_flows:
        raise ValueError(f"detect_congestion: traces have {tp.shape[1]} flows, pattern {pattern.num_flows}")
    deg = pattern.flow_degree()
    live = traces[-1].flow_bytes > 0
    mean = tp.mean(axis=0)
    p90 = np.percentile(tp, 90, axis=0)
    nstd = np.divide(tp.std(axis=0), mean, out=np.zeros_like(mean), where=mean > 0)
    kmax = int(deg.max()) + 1 if deg.size else 1
    cnt = np.bincount(deg[live], minlength=kmax)
    tot = np.bincount(deg[live], weights=mean[live], minlength=kmax)
    cls_mean = np.divide(tot, cnt, out=np.zeros(kmax), where=cnt > 0)
    degree_mean = cls_mean[deg]
    slower = live & (mean < degree_mean)
    noise = noise_floor(traces, nstd[live])
    steady = slower & (p90 < (1.0 - delta1) / (1.0 + noise_mult * noise) * degree_mean)
    erratic = live & (mean < (1.0 - delta2) * degree_mean) & (nstd > delta2 + noise_mult * noise)
    return Congestion(steady, erratic, p90, mean, nstd, degree_mean, deg, noise)

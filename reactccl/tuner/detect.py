"""Congestion detection from flow completion times only (REACT §5.2).

No topology or link capacity is used: each flow is compared with the flows of the same TEN
degree in the same pattern (steady congestion, Eq. 1) and with itself across the batch
(erratic congestion, Eq. 2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..pattern import CollectivePattern
from ..trace import EpochTrace

__all__ = ["Congestion", "detect_congestion", "throughput_matrix"]


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
    """

    steady: np.ndarray
    erratic: np.ndarray
    p90: np.ndarray
    mean: np.ndarray
    nstd: np.ndarray
    degree_mean: np.ndarray
    degree: np.ndarray

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


def detect_congestion(pattern: CollectivePattern, traces: Sequence[EpochTrace], delta1: float = 0.2,
                      delta2: float = 0.15) -> Congestion:
    """Classify every flow of ``pattern`` from a batch of traces that ran it (§5.2).

    Args:
        pattern: the pattern the traces ran (its degrees define the comparison classes).
        traces: the batch (B epochs).
        delta1, delta2: thresholds of Eq. 1 and Eq. 2.

    Flows that carry no bytes are never congested.
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
    steady = live & (p90 < (1.0 - delta1) * degree_mean)
    erratic = live & (nstd > delta2)
    return Congestion(steady, erratic, p90, mean, nstd, degree_mean, deg)

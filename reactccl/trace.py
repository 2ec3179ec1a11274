"""What one epoch of a collective looked like: every flow's bytes, start and end.

Both executors (the simulator ``reactccl.netsim`` and the real runtime
``reactccl.runtime``) return an :class:`EpochTrace`; the REACT tuner reads only
these, so it never knows whether flows were simulated or real.

Bandwidths follow nccl-tests (``doc/PERFORMANCE.md``): algbw = S / t with S the
message size in bytes; busbw = algbw x 2(n-1)/n for AllReduce, x (n-1)/n for
AllGather, ReduceScatter and AllToAll, x 1 for Broadcast and Reduce. For AllToAll S is one
rank's buffer (nccl-tests' size; the pattern's chunks are fractions of all N buffers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .pattern import Collective, CollectivePattern

__all__ = ["EpochTrace", "busbw_factor", "format_bytes", "format_time", "format_rate", "format_byte_rate",
           "format_bit_rate"]


def busbw_factor(collective: Collective | str, num_ranks: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``collective`` on ``num_ranks`` ranks."""
    c, n = Collective(collective), num_ranks
    if n <= 1:
        return 1.0 if c in (Collective.BROADCAST, Collective.REDUCE) else 0.0
    if c is Collective.ALLREDUCE:
        return 2.0 * (n - 1) / n
    if c in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLTOALL):
        return (n - 1) / n
    return 1.0


@dataclass
class EpochTrace:
    """One epoch of one collective.

    Attributes:
        epoch: epoch number (0-based) within the run.
        pattern: the pattern that ran, with positions already mapped to ranks;
            flow ``i`` here is flow ``i`` of the pattern.
        message_bytes: the message size S in bytes (nccl-tests' size).
        start, end: per-flow start (first byte sent) and end (data available at
            the receiver) in seconds from the epoch start, shape ``(F,)``.
        flow_bytes: bytes per flow, shape ``(F,)``.
        duration: the epoch's completion time in seconds (the collective's
            time; for the simulator the last flow's end).
        paths: link ids per flow (simulator only), else None.
        meta: free-form extras (seed, ECMP ports, job name, ...).
    """

    epoch: int
    pattern: CollectivePattern
    message_bytes: float
    start: np.ndarray
    end: np.ndarray
    flow_bytes: np.ndarray
    duration: float
    paths: list[np.ndarray] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        F = self.pattern.num_flows
        for name in ("start", "end", "flow_bytes"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            if arr.shape != (F,):
                raise ValueError(f"EpochTrace.{name}: expected shape ({F},), got {arr.shape}")
            setattr(self, name, arr)
        if not np.all(self.end >= self.start):
            i = int(np.flatnonzero(~(self.end >= self.start))[0])
            raise ValueError(f"EpochTrace: flow {i} ends ({self.end[i]}) before it starts ({self.start[i]})")

    @property
    def fct(self) -> np.ndarray:
        """Flow completion times (end - start) in seconds, shape ``(F,)``."""
        return self.end - self.start

    @property
    def throughput(self) -> np.ndarray:
        """Per-flow throughput in bit/s (bytes x 8 / FCT), shape ``(F,)``."""
        fct = np.maximum(self.fct, 1e-12)
        return self.flow_bytes * 8.0 / fct

    @property
    def algbw(self) -> float:
        """Algorithm bandwidth in bytes/s (S / t); ``nan`` when ``duration`` is 0 (an empty
        collective, e.g. one rank: no flows, nothing moved, so no bandwidth is defined)."""
        return self.message_bytes / self.duration if self.duration > 0 else float("nan")

    @property
    def busbw(self) -> float:
        """Bus bandwidth in bytes/s (nccl-tests); ``nan`` when ``duration`` is 0, like :attr:`algbw`."""
        return self.algbw * busbw_factor(self.pattern.collective, self.pattern.num_ranks)

    def slowest(self, k: int = 5) -> list[dict[str, Any]]:
        """The ``k`` flows with the longest FCT, as dicts (flow, step, src, dst, bytes, start, end, fct)."""
        order = np.argsort(-self.fct, kind="stable")[:k]
        p = self.pattern
        return [{"flow": int(i), "step": int(p.step[i]), "src": int(p.src[i]), "dst": int(p.dst[i]),
                 "bytes": float(self.flow_bytes[i]), "start": float(self.start[i]), "end": float(self.end[i]),
                 "fct": float(self.fct[i])} for i in order]


def format_bytes(n: float) -> str:
    """Decimal units as nccl-tests and the papers use them (1 MB = 10^6 bytes); below 1 KB the
    bytes with up to 4 significant digits, so a fluid chunk of a tiny message shows as what it is
    (1 B over 4 ranks: ``"0.25 B"``, not ``"0 B"``)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:.4g} B"


def format_time(t: float) -> str:
    """Seconds in s, ms, µs or ns."""
    a = abs(t)
    if a >= 1:
        return f"{t:.4g} s"
    if a >= 1e-3:
        return f"{t * 1e3:.4g} ms"
    if a >= 1e-6:
        return f"{t * 1e6:.4g} µs"
    return f"{t * 1e9:.4g} ns"


def format_byte_rate(bytes_per_s: float) -> str:
    """A bandwidth in bytes/s in GB/s (nccl-tests' unit) with 3 decimals, or in MB/s,
    KB/s or B/s when GB/s would show fewer than 3 significant digits (``"0.000 GB/s"`` says
    nothing): 2.5e9 -> ``"2.500 GB/s"``, 4.2e5 -> ``"420.000 KB/s"``, 0 -> ``"0 B/s"``."""
    a = abs(bytes_per_s)
    if a == 0:
        return "0 B/s"
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)):
        if a >= (scale if unit != "GB/s" else 0.1 * scale):
            return f"{bytes_per_s / scale:.3f} {unit}"
    return f"{bytes_per_s:.3g} B/s"


def format_bit_rate(bits_per_s: float) -> str:
    """A rate in bit/s as Gbps, Mbps, Kbps or bps (2 decimals; same rule as
    :func:`format_byte_rate`)."""
    a = abs(bits_per_s)
    if a == 0:
        return "0 bps"
    for unit, scale in (("Gbps", 1e9), ("Mbps", 1e6), ("Kbps", 1e3)):
        if a >= (scale if unit != "Gbps" else 0.1 * scale):
            return f"{bits_per_s / scale:.2f} {unit}"
    return f"{bits_per_s:.3g} bps"


def format_rate(bytes_per_s: float) -> str:
    """A bandwidth in bytes/s shown as bytes/s and bits/s, e.g. ``"2.500 GB/s (20.00 Gbps)"``;
    small rates switch units (``"420.000 KB/s (3.36 Mbps)"``) instead of printing 0.000 GB/s."""
    return f"{format_byte_rate(bytes_per_s)} ({format_bit_rate(bytes_per_s * 8)})"

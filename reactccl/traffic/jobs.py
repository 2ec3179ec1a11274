"""A job as both network engines take it: a pattern, the host of each rank, a message size.

:class:`Job` is one collective of an epoch. :func:`host_ids` turns a placement given as host ids or
host names into ids, and :func:`check_message_bytes` refuses a size that is not a finite number of
bytes > 0, with the field named. The fluid engine (:mod:`reactccl.netsim`) and the packet engine
(:mod:`reactccl.packetsim`) both check their jobs with these, so a bad job reads the same on both.

Source: ours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..pattern import CollectivePattern
from ..topology import Topology

__all__ = ["Job", "check_message_bytes", "host_ids"]


@dataclass(frozen=True)
class Job:
    """One job of an epoch: its pattern, rank->host placement (shape ``(N,)``) and message size (bytes)."""

    pattern: CollectivePattern
    placement: np.ndarray
    message_bytes: float


def check_message_bytes(value, where: str) -> float:
    """``value`` as a float message size in bytes.

    Raises:
        ValueError: naming ``where``, unless ``value`` is a finite number > 0.
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a number of bytes, got {value!r}") from None
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"{where}: must be a finite number of bytes > 0, got {value!r}")
    return v


def host_ids(topology: Topology, placement) -> np.ndarray:
    """Host ids, shape ``(N,)`` int64, from host ids or host names (``h3``, ``n3``).

    Raises:
        TopologyError: a name or id that is not a host of ``topology``.
    """
    if isinstance(placement, np.ndarray) and placement.dtype.kind in "iu" and placement.ndim == 1 and (
            placement.size == 0 or (placement.min() >= 0 and placement.max() < topology.num_hosts)):
        return placement.astype(np.int64, copy=False)
    return np.array([topology.host_id(h) for h in placement], dtype=np.int64)

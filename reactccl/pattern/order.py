"""Step order within a chunk graph: which sends of a rank must have left it before a send may start.

The execution model every executor follows (DESIGN.md "The pattern IR"): a flow starts once

1. its data has arrived -- every earlier flow into its source touching one of its chunks
   (:meth:`CollectivePattern.dependencies`), and
2. in *step order* (the default), the same rank's sends of the previous step in which it sends
   in the same chunk graph have all left it (finished sending; their arrival is not awaited).

Sends of one (rank, chunk graph, step) run together; different chunk graphs are independent
(like NCCL channels and MSCCL threadblocks, each of which posts its sends in program order).
Because every send of step ``s_k`` waited for those of ``s_{k-1}``, waiting on the previous
sending step is the same as waiting on all earlier ones.

:func:`send_groups` gives that rule as *groups*: one per distinct (src, chunk graph, step) that
has a send, with the group each flow belongs to and the previous group of the same
(src, chunk graph), so the condition costs O(F) to state (no pairwise list).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import CollectivePattern

__all__ = ["ORDERS", "SendGroups", "check_order", "send_groups"]

ORDERS = ("step", "data")
"""Execution orders: ``"step"`` (data + step order within a chunk graph, the default) and
``"data"`` (data only: a send starts as soon as its data is in, whatever its step)."""


def check_order(order: str) -> str:
    """``order`` if it is one of :data:`ORDERS`, else ValueError naming the allowed values."""
    if order not in ORDERS:
        raise ValueError(f"order: expected one of {', '.join(ORDERS)}, got {order!r}")
    return order


@dataclass(frozen=True)
class SendGroups:
    """Sends grouped by (src, chunk graph, step), G groups for F flows.

    Attributes:
        group: group of each flow, shape ``(F,)`` (groups are numbered in (src, graph, step) order).
        size: flows in each group, shape ``(G,)``.
        prev: the previous group of the same (src, graph), shape ``(G,)``; -1 for a first one.
        ptr, members: CSR ``(G + 1,)`` / ``(F,)``: the flows of each group (ascending ids).
    """

    group: np.ndarray
    size: np.ndarray
    prev: np.ndarray
    ptr: np.ndarray
    members: np.ndarray

    @property
    def num_groups(self) -> int:
        """Number of groups G."""
        return len(self.size)

    def predecessors(self, f: int) -> np.ndarray:
        """Flows that must have left their source before flow ``f`` may start (step order)."""
        g = int(self.prev[self.group[f]])
        return self.members[self.ptr[g]:self.ptr[g + 1]] if g >= 0 else self.members[:0]


def send_groups(pattern: CollectivePattern) -> SendGroups:
    """The step-order groups of ``pattern`` (module docstring); O(F log F) numpy work."""
    F = pattern.num_flows
    if F == 0:
        z = np.zeros(0, dtype=np.int64)
        return SendGroups(z, z.copy(), z.copy(), np.zeros(1, dtype=np.int64), z.copy())
    G_ = int(pattern.chunk_graph.max()) + 1
    T = max(pattern.num_steps, 1)
    lane = pattern.src.astype(np.int64) * G_ + pattern.flow_graph.astype(np.int64)
    key = lane * T + pattern.step.astype(np.int64)
    keys, group = np.unique(key, return_inverse=True)
    group = group.astype(np.int64).reshape(-1)
    size = np.bincount(group, minlength=len(keys)).astype(np.int64)
    glane = keys // T
    prev = np.arange(len(keys), dtype=np.int64) - 1
    first = np.ones(len(keys), dtype=bool)
    first[1:] = glane[1:] != glane[:-1]
    prev[first] = -1
    members = np.argsort(group, kind="stable").astype(np.int64)
    ptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(size, out=ptr[1:])
    return SendGroups(group, size, prev, ptr, members)

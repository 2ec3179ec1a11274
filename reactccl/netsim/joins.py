"""Data-driven start conditions of a pattern's flows as a small join graph.

:meth:`CollectivePattern.dependencies` lists, for every flow, each earlier flow into its
source that touches one of its chunks. That list can be quadratic: in the all-to-all
step of SP-allreduce on a spine-leaf (§6.3), each of the p(p-1) broadcast flows waits
on the p-1 flows into its sender, 134 million entries for p = 512. The simulator only
needs *when* a flow may start (when its last dependency has arrived), so this module
factors the same condition through *joins* with O(chunk pairs) edges:

* join ``J(r, c, s)`` fires once every flow into rank ``r`` carrying chunk ``c`` at
  step ``s`` has arrived and (if any) the join of the previous receiving step of
  ``(r, c)`` has fired — so ``J(r, c, s)`` = "all of ``(r, c)``'s receipts up to step
  ``s`` are in";
* a flow of step ``t`` from ``r`` carrying chunks ``C`` waits, for each ``c`` in ``C``
  that ``r`` received before ``t``, on the join of ``(r, c)``'s last receiving step
  before ``t``.

A flow starts exactly when all of its dependencies have arrived (the union over its
chunks of the prefixes each join stands for), at the same instant as with the full list.

With ``order="step"`` (the default, :mod:`reactccl.pattern.order`) there is one more join per
(src, chunk graph, step) group of sends, ``O(g)``: it is fed when each of the group's flows has
*sent* its last byte (not when it arrives) and releases the flows of the next group of the same
(src, chunk graph), each of which waits on it once more.

Child references mix flows and joins: ``c >= 0`` is a flow id, ``c < 0`` is join ``~c``
(bitwise not), the convention :class:`~reactccl.netsim.reference.FluidEngine` follows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..pattern import CollectivePattern
from ..pattern.order import check_order, send_groups

__all__ = ["JoinGraph", "join_graph"]


@dataclass(frozen=True)
class JoinGraph:
    """The start conditions of a pattern's F flows through J joins (CSR child lists).

    Attributes:
        flow_waiting: joins each flow waits on, shape ``(F,)``; 0 = starts at once.
        flow_child_ptr, flow_child: CSR ``(F + 1,)`` / ``(E_f,)``: the joins (encoded
            ``~j``, so all negative) that each flow's arrival feeds.
        join_waiting: inputs of each join (flows and its predecessor join), shape ``(J,)``.
        join_child_ptr, join_child: CSR ``(J + 1,)`` / ``(E_j,)``: what each join releases
            when it fires: flow ids (>= 0) and the next join of its chain (``~j``).
        flow_sent_ptr, flow_sent: CSR ``(F + 1,)`` / ``(F or 0,)``: the step-order join (``~j``)
            that each flow's *last byte leaving* feeds (empty with ``order="data"``).
    """

    flow_waiting: np.ndarray
    flow_child_ptr: np.ndarray
    flow_child: np.ndarray
    join_waiting: np.ndarray
    join_child_ptr: np.ndarray
    join_child: np.ndarray
    flow_sent_ptr: np.ndarray
    flow_sent: np.ndarray

    @property
    def num_joins(self) -> int:
        """Number of joins J."""
        return len(self.join_waiting)


def _csr(owner: np.ndarray, child: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of ``child`` grouped by ``owner`` in ``0..n-1`` (stable within an owner)."""
    order = np.argsort(owner, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=ptr[1:])
    return ptr, child[order]


def join_graph(pattern: CollectivePattern, order: str = "step") -> JoinGraph:
    """The join graph of ``pattern`` (see the module docstring); O(P log P) numpy work for
    P (flow, chunk) pairs, never the full dependency list.

    Returns a :class:`JoinGraph` whose start condition for every flow equals "all of
    ``pattern.dependencies()`` of that flow have arrived" and, with ``order="step"``, "the
    flows of :meth:`SendGroups.predecessors` have sent their last byte".

    Raises:
        ValueError: an unknown ``order``.
    """
    check_order(order)
    F, C, T = pattern.num_flows, pattern.num_chunks, max(pattern.num_steps, 1)
    empty = np.zeros(0, dtype=np.int64)
    if F == 0:
        z = np.zeros(1, dtype=np.int64)
        return JoinGraph(empty, z, empty, empty, z.copy(), empty, z.copy(), empty.copy())
    pf = pattern.pair_flow
    ch = pattern.chunk_idx.astype(np.int64)
    step = pattern.step.astype(np.int64)
    # one join per distinct receipt (rank, chunk, step), in (rank, chunk, step) order
    rkey = (pattern.dst[pf].astype(np.int64) * C + ch) * T + step[pf]
    jkey, recv_join = np.unique(rkey, return_inverse=True)
    J = len(jkey)
    group = jkey // T
    chained = np.flatnonzero(group[1:] == group[:-1])  # join i feeds join i + 1 of the same (rank, chunk)
    # each sender pair waits on the last join of (src, chunk) at a step before its own
    skey = (pattern.src[pf].astype(np.int64) * C + ch) * T + step[pf]
    prev = np.searchsorted(jkey, skey, side="left") - 1
    has = prev >= 0
    has[has] = group[prev[has]] == skey[has] // T
    wait_flow, wait_join = pf[has], prev[has]
    flow_waiting = np.bincount(wait_flow, minlength=F).astype(np.int64)
    join_waiting = np.bincount(recv_join, minlength=J).astype(np.int64)
    join_waiting[chained + 1] += 1
    flow_child_ptr, flow_child = _csr(pf, ~recv_join.astype(np.int64), F)
    j_owner = [chained, wait_join]
    j_child = [~(chained + 1), wait_flow]
    sent_ptr, sent = np.zeros(F + 1, dtype=np.int64), empty
    if order == "step":
        sg = send_groups(pattern)
        ordered = np.flatnonzero(sg.prev[sg.group] >= 0)     # flows that wait on their previous group
        flow_waiting += sg.prev[sg.group] >= 0
        join_waiting = np.concatenate([join_waiting, sg.size])
        j_owner.append(J + sg.prev[sg.group[ordered]])
        j_child.append(ordered)
        sent_ptr = np.arange(F + 1, dtype=np.int64)
        sent = ~(J + sg.group)
        J += sg.num_groups
    join_child_ptr, join_child = _csr(np.concatenate(j_owner), np.concatenate(j_child), J)
    return JoinGraph(flow_waiting, flow_child_ptr, flow_child, join_waiting, join_child_ptr, join_child,
                     sent_ptr, sent)

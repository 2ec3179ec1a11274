"""Where each chunk lies in a flat tensor, and what one rank must do to run a pattern.

Torch-free (numpy only), so the plan can be checked without processes. The
executor (:mod:`reactccl.runtime.rcollective`) turns a :class:`LocalPlan` into
point-to-point operations.

Element layout (identical on every rank, since it depends only on the pattern
and the element count):

* AllReduce, Broadcast, Reduce: chunk ``c`` covers elements
  ``[round(S_c * n), round(S_{c+1} * n))`` where ``S_c`` is the sum of the
  sizes of chunks ``0..c-1`` and ``n`` the element count (round half up).
* AllGather, ReduceScatter: block ``r`` covers ``[r*n//N, (r+1)*n//N)`` (the
  first ``N - n % N`` blocks are one element shorter when ``n`` does not divide),
  and the chunks inside a block split it by the same rounding, relative to
  the block. So chunk boundaries never cross a block boundary.
* AllToAll: the same with the N*N blocks of the pattern's message, the flat N x N
  matrix buffer of ``n = N * m`` elements (:mod:`reactccl.runtime.alltoall`): block
  ``s*N + d`` covers ``[(s*N + d)*n//N^2, (s*N + d + 1)*n//N^2)``, which is
  ``s*m + [d*m//N, (d+1)*m//N)``: rank s's input block d in row s.

A chunk may get 0 elements (1 element over 3 chunks); flows then carry only
their non-empty chunks, and a flow with none is not sent at all.

Source: REACT §6.1 and Appendix B.1 (Algorithm 2, per-rank local graph);
DESIGN.md "The pattern IR".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..pattern import CollectivePattern

__all__ = ["chunk_bounds", "block_bounds", "LocalOp", "LocalPlan", "local_plan", "SEND", "RECV"]

SEND, RECV = 0, 1


def _split(lo: int, hi: int, fractions: np.ndarray) -> np.ndarray:
    """Boundaries splitting ``[lo, hi)`` by ``fractions`` (summing to ~1), round half up."""
    n = hi - lo
    cum = np.concatenate(([0.0], np.cumsum(fractions)))
    cum = cum / cum[-1]
    b = lo + np.floor(cum * n + 0.5).astype(np.int64)
    b[0], b[-1] = lo, hi
    return np.maximum.accumulate(np.clip(b, lo, hi))


def block_bounds(num_ranks: int, numel: int) -> np.ndarray:
    """Block boundaries of AllGather/ReduceScatter, shape ``(N+1,)``: block ``r``
    is ``[b[r], b[r+1])`` = ``[r*n//N, (r+1)*n//N)``. (AllToAll's N*N blocks: pass N*N.)"""
    if numel < 0:
        raise ValueError(f"numel: must be >= 0, got {numel}")
    return (np.arange(num_ranks + 1, dtype=np.int64) * int(numel)) // int(num_ranks)


def chunk_bounds(pattern: CollectivePattern, numel: int) -> np.ndarray:
    """Element boundaries of the chunks for a message of ``numel`` elements.

    Returns:
        int64 array of shape ``(C+1,)``; chunk ``c`` is ``[b[c], b[c+1])``.

    Raises:
        ValueError: ``numel`` is negative.
    """
    numel = int(numel)
    if numel < 0:
        raise ValueError(f"numel: must be >= 0, got {numel}")
    sizes = pattern.chunk_size
    if not pattern.collective.is_blocked:
        return _split(0, numel, sizes)
    owner = pattern.chunk_block         # rank r's block, or block s*N + d of an AllToAll
    blocks = block_bounds(pattern.collective.num_blocks(pattern.num_ranks), numel)
    out = np.zeros(pattern.num_chunks + 1, dtype=np.int64)
    for r in np.unique(owner):
        ids = np.flatnonzero(owner == r)  # consecutive, since chunks lie in id order
        out[ids[0]:ids[-1] + 2] = _split(int(blocks[r]), int(blocks[r + 1]), sizes[ids])
    out[-1] = numel
    return out


@dataclass
class LocalOp:
    """One flow as seen by one rank: a send (this rank is the source) or a receive.

    Attributes:
        index: position in :attr:`LocalPlan.ops` (the total order).
        flow: flow index in the pattern.
        kind: :data:`SEND` or :data:`RECV`.
        step: the flow's step.
        peer: the other rank.
        op: 0 reduce, 1 copy (what the receiver does).
        chunks: the flow's non-empty chunk ids, shape ``(k,)``.
        segments: ``(m, 2)`` element ranges ``[lo, hi)`` in the user's tensor,
            adjacent chunks merged, in chunk order.
        numel: elements carried (sum of segment lengths).
        offset: where this op's staging buffer starts in the plan's send or
            receive arena (elements).
        chunk_list, seg_list: ``chunks`` and ``segments`` as Python tuples (the
            executor's hot loop reads these).
    """

    index: int
    flow: int
    kind: int
    step: int
    peer: int
    op: int
    chunks: np.ndarray
    segments: np.ndarray
    numel: int
    offset: int = 0
    chunk_list: tuple = ()
    seg_list: tuple = ()

    def __post_init__(self) -> None:
        self.chunk_list = tuple(self.chunks.tolist())
        self.seg_list = tuple(tuple(s) for s in self.segments.tolist())

    def describe(self, pattern: CollectivePattern | None = None) -> str:
        """``"flow 7 (step 2, send to rank 3, chunks [4, 5])"``."""
        verb = "send to" if self.kind == SEND else "receive from"
        return f"flow {self.flow} (step {self.step}, {verb} rank {self.peer}, chunks {self.chunks.tolist()})"


@dataclass
class LocalPlan:
    """What rank ``rank`` does to run ``pattern`` on a message of ``numel`` elements.

    Ops are kept in one total order: by step, then reads (sends) before writes
    (receives) of the same step, then flow index. Per chunk, :attr:`queues`
    lists the ops touching it in that order. An op may run once it is at the
    head of every one of its chunks' queues (and, for a receive, its data has
    arrived). This gives exactly the IR's semantics, data-driven:

    * a send of step t sees the chunk after all writes of steps < t and before
      any write of step >= t (it is staged into its own buffer at that moment);
    * writes into one chunk apply in step order, then flow order (so a copy
      lands after earlier reduces, and float sums have one fixed order);
    * nothing waits for chunks it does not touch (no global barrier).

    The order is acyclic (it is a total order), so execution cannot deadlock.

    Also holds ``sends`` and ``recvs`` (the ops of each kind, in order) and their
    flow ids ``send_flows``/``recv_flows`` and element counts ``send_elems``.
    """

    rank: int
    numel: int
    bounds: np.ndarray
    ops: list[LocalOp]
    queues: dict[int, list[int]] = field(default_factory=dict)
    send_numel: int = 0
    recv_numel: int = 0

    def __post_init__(self) -> None:
        self.sends = [o for o in self.ops if o.kind == SEND]
        self.recvs = [o for o in self.ops if o.kind == RECV]
        self.send_flows = np.array([o.flow for o in self.sends], dtype=np.int64)
        self.recv_flows = np.array([o.flow for o in self.recvs], dtype=np.int64)
        self.send_elems = np.array([o.numel for o in self.sends], dtype=np.float64)


def _segments(chunks: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    lo, hi = bounds[chunks], bounds[chunks + 1]
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    start = np.concatenate(([True], lo[1:] != hi[:-1]))
    seg_lo = lo[start]
    seg_hi = np.append(hi[np.flatnonzero(start)[1:] - 1], hi[-1])
    return np.stack([seg_lo, seg_hi], axis=1)


def local_plan(pattern: CollectivePattern, rank: int, numel: int) -> LocalPlan:
    """Build rank ``rank``'s :class:`LocalPlan` for a message of ``numel`` elements.

    Raises:
        ValueError: ``rank`` is not a rank of the pattern, or ``numel < 0``.
    """
    p = pattern
    if not 0 <= rank < p.num_ranks:
        raise ValueError(f"rank {rank} is not a rank of this {p.num_ranks}-rank pattern")
    bounds = chunk_bounds(p, numel)
    nonempty = bounds[1:] > bounds[:-1]
    mine = np.flatnonzero((p.src == rank) | (p.dst == rank))
    kind = np.where(p.src[mine] == rank, SEND, RECV)
    order = np.lexsort((mine, kind, p.step[mine]))
    ops: list[LocalOp] = []
    queues: dict[int, list[int]] = {}
    offs = [0, 0]
    for j in order:
        f, k = int(mine[j]), int(kind[j])
        ch = p.chunk_idx[p.chunk_ptr[f]:p.chunk_ptr[f + 1]]
        ch = np.sort(ch[nonempty[ch]])
        if ch.size == 0:
            continue
        seg = _segments(ch, bounds)
        n = int((seg[:, 1] - seg[:, 0]).sum())
        peer = int(p.dst[f] if k == SEND else p.src[f])
        op = LocalOp(len(ops), f, k, int(p.step[f]), peer, int(p.op[f]), ch, seg, n, offs[k])
        offs[k] += n
        for c in ch.tolist():
            queues.setdefault(c, []).append(op.index)
        ops.append(op)
    return LocalPlan(rank, int(numel), bounds, ops, queues, offs[SEND], offs[RECV])

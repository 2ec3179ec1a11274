"""One rank's execution schedule: its :class:`~reactccl.runtime.layout.LocalPlan` split into
pipeline slices, with the decisions RCollective's executors need.

Pipelining (like NCCL's slices or Gloo's segments): chunk ``c`` of ``[lo, hi)`` is cut into
``S`` parts, part ``j`` being ``[lo + n*j//S, lo + n*(j+1)//S)`` with ``n = hi - lo``. Flow
``f`` becomes ``S`` slice ops; slice ``j`` carries part ``j`` of each of its chunks. The
parts of one chunk never meet, so each part runs the whole pattern on its own, and part
``j`` of step ``t+1`` can leave while part ``j+1`` of step ``t`` is still arriving. Every
element is still touched by the same flows in the same order (step, then flow id), so the
result is bit-for-bit the unsliced one.

Per slice op the schedule decides:

* ``staged`` (sends): copy the data into a send buffer first. Needed when the op covers
  several separate ranges (one message needs one contiguous buffer), or chosen when this rank
  writes one of the op's chunks in the same step (the write would otherwise wait for the send
  to leave). An unstaged send is sent straight from the tensor and keeps later writes of its
  chunks waiting until it has left.
* ``staged`` (receives): receive into a buffer and add/copy it in afterwards. A copy flow
  covering one range is received straight into the tensor when that is safe (see
  :func:`in_place_receives`); a reduce always needs the buffer (the rank's own value is an
  operand).
* ``after`` (sends): the slice ops of this rank's previous step in the same lane (chunk
  graph and part) that must have left before this one starts (the execution-model rule:
  within one chunk graph a rank's sends go in step order; sends of one step go together).

Source: REACT §6.1 (RCollective posts the pattern's p2p operations, per chunk sub-graph);
NCCL ``src/device/prims_simple.h`` slicing for the idea of parts; no code copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..pattern import CollectivePattern
from .layout import RECV, SEND, LocalPlan, local_plan

__all__ = ["SliceOp", "Schedule", "build_schedule", "in_place_receives", "choose_parts", "one_receive_per_step",
           "advance", "flow_reaches", "receives_in_order"]

_MAX_VISIT = 200_000  # flows a safety proof may look at before giving up (then: stage)


@dataclass(eq=False)
class SliceOp:
    """One part of one flow as seen by one rank.

    Attributes:
        index: position in :attr:`Schedule.ops` (order: step, sends first, flow, part).
        flow, kind, step, peer, op: as :class:`~reactccl.runtime.layout.LocalOp`
            (``op``: 0 reduce, 1 copy; ``kind``: SEND or RECV).
        part: pipeline slice ``0..S-1``.
        chunks: the flow's non-empty chunk ids, shape ``(k,)`` (for messages).
        units: dependency units ``chunk * S + part`` touched.
        segs: ``((lo, hi), ...)`` element ranges in the tensor, adjacent ones merged.
        numel: elements carried.
        staged: use a staging buffer (see the module docstring).
        offset: where the staging buffer starts in the send or receive arena (elements).
        tag: the p2p tag, ``TAG_BASE + flow * S + part``.
        lane: chunk graph * S + part.
        after: indices of the sends that must have left before this send starts.
        slot: position of ``flow`` in :attr:`Schedule.send_flows` / ``recv_flows``.
    """

    index: int
    flow: int
    kind: int
    step: int
    peer: int
    op: int
    part: int
    chunks: np.ndarray
    units: tuple
    segs: tuple
    numel: int
    staged: bool
    offset: int = 0
    tag: int = 0
    lane: int = 0
    after: tuple = ()
    slot: int = 0

    def describe(self) -> str:
        """``"flow 7 (step 2, send to rank 3, chunks [4, 5], part 1/4)"``."""
        verb = "send to" if self.kind == SEND else "receive from"
        return f"flow {self.flow} (step {self.step}, {verb} rank {self.peer}, chunks {self.chunks.tolist()})"


@dataclass
class Schedule:
    """Rank ``rank``'s slice ops for a message of ``numel`` elements in ``parts`` parts.

    ``queues[u]`` lists the ops touching unit ``u`` in order; an op may run when it is at the
    head of all its units' queues (reads of one unit may overlap; a write waits for earlier
    unstaged reads to leave). ``send_flows``/``recv_flows``: the flows sent/received, in
    order; ``send_elems``: their element counts; ``send_numel``/``recv_numel``: arena sizes.
    ``lane_next[i]``: sends waiting for send ``i`` to leave.
    """

    rank: int
    numel: int
    parts: int
    ops: list[SliceOp]
    queues: dict[int, list[int]]
    send_numel: int
    recv_numel: int
    send_flows: np.ndarray
    recv_flows: np.ndarray
    send_elems: np.ndarray
    lane_next: dict[int, list[int]] = field(default_factory=dict)
    direct: bool = False

    def __post_init__(self) -> None:
        self.sends = [o for o in self.ops if o.kind == SEND]
        self.recvs = [o for o in self.ops if o.kind == RECV]
        self.steps = sorted({o.step for o in self.ops})


def choose_parts(pattern: CollectivePattern, numel: int, element_size: int, slice_bytes: int | None,
                 max_parts: int = 16) -> int:
    """Parts per chunk: the largest chunk's bytes over ``slice_bytes``, rounded, in
    ``[1, max_parts]`` (1 when ``slice_bytes`` is None: no pipelining)."""
    if not slice_bytes or numel <= 0:
        return 1
    biggest = float(np.max(pattern.chunk_size)) * numel * element_size
    return int(min(max_parts, max(1, round(biggest / slice_bytes))))


def one_receive_per_step(pattern: CollectivePattern, rank: int) -> bool:
    """Whether ``rank`` receives at most one flow in every step (then a thread waiting for its
    receives in step order sees each one arrive when it does: exact receive times)."""
    steps = pattern.step[pattern.dst == rank]
    return steps.size == np.unique(steps).size


def receives_in_order(pattern: CollectivePattern, rank: int) -> bool:
    """Whether ``rank`` receives from one peer only, at most one flow per step. Then its
    receives share one connection and arrive in the peer's posting order, so a thread that
    waits for them in step order is never held up by one while a later one is already there
    and could feed a send (a ring's ranks; not a tree's, whose two chunk graphs reach a rank
    from two parents and must progress independently)."""
    mine = pattern.dst == rank
    return one_receive_per_step(pattern, rank) and np.unique(pattern.src[mine]).size <= 1


def _reaches(p: CollectivePattern, target: int, f: int, nonempty: np.ndarray, chunks_of,
             budget: list | None = None) -> bool:
    """Whether flow ``f`` depends (transitively, through non-empty shared chunks) on ``target``;
    False once ``budget[0]`` (flows left to look at, shared by several calls) runs out."""
    ptr, idx = p.dependencies()
    t_step = int(p.step[target])
    seen = {f}
    stack = [f]
    while stack:
        g = stack.pop()
        mine = chunks_of(g)
        for h in idx[ptr[g]:ptr[g + 1]].tolist():
            if h in seen or p.step[h] < t_step or not (mine & chunks_of(h)):
                continue
            if h == target:
                return True
            seen.add(h)
            if len(seen) > _MAX_VISIT:
                return False
            if budget is not None:
                budget[0] -= 1
                if budget[0] < 0:
                    return False
            stack.append(h)
    return False


def flow_reaches(pattern: CollectivePattern, bounds: np.ndarray, budget: int | None = None):
    """``reaches(target, f)``: whether flow ``f`` depends, transitively through chunks that are
    non-empty under ``bounds`` (:func:`~reactccl.runtime.layout.chunk_bounds`), on flow
    ``target`` (so ``f``'s data exists only once ``target`` has been received). False where one
    proof would look at more than 200,000 flows, or once all calls together looked at more
    than ``budget`` (None: no total limit), so a caller's cost stays bounded."""
    nonempty = bounds[1:] > bounds[:-1]
    cache: dict[int, set] = {}

    def chunks_of(g: int) -> set:
        s = cache.get(g)
        if s is None:
            ch = pattern.chunk_idx[pattern.chunk_ptr[g]:pattern.chunk_ptr[g + 1]]
            s = cache[g] = set(ch[nonempty[ch]].tolist())
        return s

    left = None if budget is None else [int(budget)]
    return lambda target, f: _reaches(pattern, target, f, nonempty, chunks_of, left)


def in_place_receives(pattern: CollectivePattern, plan: LocalPlan) -> set[int]:
    """Flow ids of ``plan``'s copy receives that may be posted at the start straight into the
    tensor, for the data-driven executor.

    A receive lands whenever its data arrives, so it is safe in place only if its data
    cannot arrive before this rank is done with the chunk's old value. That holds when, in
    every one of its chunks' queues, the op before it is a flow that the received flow
    depends on (transitively, :meth:`CollectivePattern.dependencies`): the data then comes
    from a chain that started after that op (and so every op before it) was done here. Where
    that op is a send, every send of the chunk in the same step must be such a flow: sends of
    one step may be in flight together, and an unstaged one reads the chunk until it has left
    (earlier steps' sends have left before, by the lane rule). A receive that is first in its
    queues is safe too (this rank holds nothing there yet).
    Only single-range copies qualify; everything else is staged.
    """
    p = plan
    reaches = flow_reaches(pattern, p.bounds)
    ok = set()
    for o in p.recvs:
        if o.op != 1 or len(o.seg_list) != 1:
            continue
        safe = True
        for c in o.chunk_list:
            q = p.queues[c]
            k = q.index(o.index)
            if not k:
                continue
            before = [q[k - 1]]
            prev = p.ops[before[0]]
            if prev.kind == SEND:       # same-step sends of the chunk may all still be in flight
                j = k - 2
                while j >= 0 and p.ops[q[j]].kind == SEND and p.ops[q[j]].step == prev.step:
                    before.append(q[j])
                    j -= 1
            if not all(reaches(p.ops[i].flow, o.flow) for i in before):
                safe = False
                break
        if safe:
            ok.add(o.flow)
    return ok


def _parts_of(lo: int, hi: int, parts: int) -> list[tuple[int, int]]:
    n = hi - lo
    return [(lo + n * j // parts, lo + n * (j + 1) // parts) for j in range(parts)]


def build_schedule(pattern: CollectivePattern, rank: int, numel: int, parts: int = 1, stage: str = "needed",
                   in_place: bool = True, stepwise: bool = False, tag_base: int = 0,
                   direct: bool = False, eager: bool = False) -> Schedule:
    """Build rank ``rank``'s :class:`Schedule`.

    Args:
        parts: pipeline parts per chunk (>= 1; use 1 for the step-by-step executor).
        stage: ``"needed"`` (stage sends only as the module docstring says) or ``"always"``
            (every send and receive through a buffer: the executor before pipelining).
        in_place: receive copies straight into the tensor where safe.
        stepwise: decisions for the step-by-step executor (a step's ops run as one group,
            so a copy is safe in place unless another op of this rank in the same step
            touches its chunks unstaged); else for the data-driven one.
        tag_base: added to every tag.
        direct: for the executor that waits on the calling thread (``run_direct``); the
            staging and lane decisions are the data-driven executor's, only the schedule
            is marked (:func:`~reactccl.runtime.direct.compile_direct` accepts it).
        eager: with ``direct``, stage every send and let no send wait for another to leave
            (a send waits only for its data): the execution-model rule relaxed for small
            messages, where the direct executor's waits in mid-call cost more than copies.

    Raises:
        ValueError: ``rank``/``numel`` out of range, ``parts < 1`` or a bad ``stage``.
    """
    if parts < 1:
        raise ValueError(f"parts: must be >= 1, got {parts}")
    if eager and not direct:
        raise ValueError("eager: only for a direct schedule (direct=True)")
    if stage not in ("needed", "always"):
        raise ValueError(f"stage: expected 'needed' or 'always', got {stage!r}")
    plan = local_plan(pattern, rank, numel)
    bounds = plan.bounds
    always = stage == "always"
    writes: dict[int, set] = {}
    for o in plan.recvs:
        writes.setdefault(o.step, set()).update(o.chunk_list)
    if always or not in_place:
        landing: set = set()
    elif stepwise:
        landing = {o.flow for o in plan.recvs if o.op == 1 and len(o.seg_list) == 1}
    else:
        landing = in_place_receives(pattern, plan)
    graph = pattern.chunk_graph
    send_flows = np.array([o.flow for o in plan.sends], dtype=np.int64)
    recv_flows = np.array([o.flow for o in plan.recvs], dtype=np.int64)
    slot = {(SEND, f): i for i, f in enumerate(send_flows.tolist())}
    slot.update({(RECV, f): i for i, f in enumerate(recv_flows.tolist())})
    ops: list[SliceOp] = []
    queues: dict[int, list[int]] = {}
    offs = [0, 0]
    lanes: dict[int, list] = {}          # lane -> [[step, [op indices]], ...] of this rank's sends
    for o in plan.ops:
        cuts = [_parts_of(int(bounds[c]), int(bounds[c + 1]), parts) for c in o.chunk_list]
        if o.kind == SEND:
            wanted = always or eager or (o.chunk_list and not writes.get(o.step, set()).isdisjoint(o.chunk_list))
        else:
            wanted = always or o.flow not in landing
        for j in range(parts):
            live = [k for k, cut in enumerate(cuts) if cut[j][1] > cut[j][0]]
            if not live:
                continue
            pieces = sorted(cuts[k][j] for k in live)
            segs: list[list[int]] = []
            for lo, hi in pieces:
                if segs and segs[-1][1] == lo:
                    segs[-1][1] = hi
                else:
                    segs.append([lo, hi])
            n = sum(hi - lo for lo, hi in segs)
            staged = bool(wanted or len(segs) > 1)
            units = tuple(o.chunk_list[k] * parts + j for k in live)
            lane = int(graph[o.chunk_list[0]]) * parts + j
            so = SliceOp(len(ops), o.flow, o.kind, o.step, o.peer, o.op, j, o.chunks, units,
                         tuple(map(tuple, segs)), n, staged, offs[o.kind] if staged else 0,
                         tag_base + o.flow * parts + j, lane, (), slot[(o.kind, o.flow)])
            if staged:
                offs[o.kind] += n
            for u in units:
                queues.setdefault(u, []).append(so.index)
            if o.kind == SEND and not eager:
                groups = lanes.setdefault(lane, [])
                if not groups or groups[-1][0] != o.step:
                    groups.append([o.step, []])
                if len(groups) > 1:
                    so.after = tuple(groups[-2][1])
                groups[-1][1].append(so.index)
            ops.append(so)
    lane_next: dict[int, list[int]] = {}
    for so in ops:
        for i in so.after:
            lane_next.setdefault(i, []).append(so.index)
    send_elems = np.zeros(len(send_flows), dtype=np.float64)
    for so in ops:
        if so.kind == SEND:
            send_elems[so.slot] += so.numel
    return Schedule(rank, int(numel), parts, ops, queues, offs[SEND], offs[RECV], send_flows, recv_flows,
                    send_elems, lane_next, direct)


def advance(queues: dict[int, list[int]], head: dict[int, int], units: tuple[int, ...], todo: list[int]) -> None:
    """Move the heads of ``units``' queues (:attr:`Schedule.queues`) past the op that heads them all,
    and add each queue's next op to ``todo`` (the executors' common step; ``head`` is updated)."""
    for u in units:
        head[u] += 1
        q = queues[u]
        if head[u] < len(q):
            todo.append(q[head[u]])

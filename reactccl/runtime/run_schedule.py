"""RCollective's two executors of a :class:`~reactccl.runtime.schedule.Schedule` on one rank.

``run_data`` (Gloo, CPU tensors), data-driven:

* every receive is posted at the start (straight into the tensor, or into its staging buffer);
* an op runs once it heads every queue of its units (:class:`Schedule`): a send is then posted
  (staged first if so decided), provided its lane's sends of the previous step have left; a
  received op is added/copied in once its data is there (an in-place copy needs nothing);
  several sends of one unit may be in flight together, a write waits until earlier unstaged
  sends of its units have left;
* a Gloo request only completes when someone waits on it, so a pool of threads waits on
  every request (with the timeout) and reports to the driver through one queue; the driver
  drains every report that is there before it runs what became ready. Posting never blocks,
  so no order of arrivals can deadlock.

A ``direct`` schedule (ranks that receive one flow per step, and every rank up to 64 KiB: the
calling thread itself waits for the receives, in schedule order, and for sends where the rule
needs them to have left) runs the same rule compiled into a fixed order of ops
(:mod:`reactccl.runtime.direct`), replayed by ``run_direct``.

``run_stepwise`` (NCCL, CUDA tensors; any backend with ``mode="stepwise"``): step after
step, all of a step's sends and receives as one ``batch_isend_irecv`` (one NCCL group, which
makes rings of sends and receives deadlock-free; NCCL ignores tags and matches the sends and
receives between two ranks in posting order, which is the same on both sides here: flow id
order within a step). ``Work.wait()`` makes the current stream wait for NCCL's stream, so the
adds/copies after it run on the current stream once the data is there; CUDA events recorded
on the current stream before the group and after those adds time the step, which is every
flow of it (the data is "available to the next dependent kernel", REACT §6.1). With a
timeout, ``wait`` also blocks the host until the work is done or the timeout passes
(``Work.wait``'s documented behaviour), so every step is bounded; PyTorch notes that a hung
coalesced group may not honour it (pytorch/pytorch#120741), which is why the NCCL bench turns
on ``TORCH_NCCL_ASYNC_ERROR_HANDLING`` (the watchdog then aborts after the group's timeout).
``batch_isend_irecv`` on NCCL needs ``torch.cuda.set_device`` per rank and the group's first
call to be a collective (RCollective's agreement check is one).

Both return ``(send start, receive end)`` per flow of the schedule's ``send_flows`` /
``recv_flows`` (``time.monotonic()`` seconds): a flow starts when its first part is posted
and ends when its last part has arrived.

Source: REACT §6.1 and Appendix B.1 (Algorithm 2); PyTorch ``torch.distributed`` p2p
semantics (``isend``/``irecv``, ``batch_isend_irecv``, ``Work.wait``).
"""

from __future__ import annotations

import datetime
import queue
import time

import torch
import torch.distributed as dist

from .direct import SENDS, SENT, WAIT, DirectProgram, compile_direct
from .layout import RECV, SEND
from .schedule import Schedule, SliceOp, advance

__all__ = ["run_data", "run_stepwise", "run_direct"]

IDLE, POSTED, DONE = 0, 1, 2   # an op of run_data: not run yet, posted (an unstaged send), done


def _view(op: SliceOp, flat: torch.Tensor) -> torch.Tensor:
    lo, hi = op.segs[0]
    return flat[lo:hi]


def stage(op: SliceOp, flat: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
    """Copy ``op``'s ranges of ``flat`` into its place in the arena ``buf``; returns that place."""
    out = buf[op.offset:op.offset + op.numel]
    if len(op.segs) == 1:
        lo, hi = op.segs[0]
        out.copy_(flat[lo:hi])
        return out
    k = 0
    for lo, hi in op.segs:
        out[k:k + hi - lo].copy_(flat[lo:hi])
        k += hi - lo
    return out


def apply(op: SliceOp, flat: torch.Tensor, buf: torch.Tensor) -> None:
    """Add (reduce) or copy ``op``'s staged data from ``buf`` into ``flat``."""
    src = buf[op.offset:op.offset + op.numel]
    k = 0
    for lo, hi in op.segs:
        if op.op == 0:
            flat[lo:hi].add_(src[k:k + hi - lo])
        else:
            flat[lo:hi].copy_(src[k:k + hi - lo])
        k += hi - lo


def _times(sch: Schedule, t_post: list, t_done: list) -> tuple[list[float], list[float]]:
    start = [float("inf")] * len(sch.send_flows)
    end = [0.0] * len(sch.recv_flows)
    for o in sch.ops:
        if o.kind == SEND:
            start[o.slot] = min(start[o.slot], t_post[o.index])
        else:
            end[o.slot] = max(end[o.slot], t_done[o.index])
    return start, end


def run_data(rc, flat: torch.Tensor, sch: Schedule) -> tuple[list[float], list[float]]:
    """Run ``sch`` data-driven on ``rc``'s group (see the module docstring)."""
    ops = sch.ops
    if not ops:
        return [], []
    if sch.direct:
        return run_direct(rc, flat, sch, compile_direct(sch))
    sbuf, rbuf = rc._arena(sch, flat)
    pool = rc._waiters(len(ops))
    events: queue.SimpleQueue = queue.SimpleQueue()
    td = datetime.timedelta(seconds=rc.timeout)
    now = time.monotonic

    def wait(i: int, work) -> None:
        try:
            work.wait(timeout=td)
            events.put((i, now(), None))
        except Exception as e:  # noqa: BLE001 - reported to the driver with the flow's name
            events.put((i, now(), e))

    n = len(ops)
    state = [IDLE] * n
    arrived = [False] * n
    t_post, t_done = [0.0] * n, [0.0] * n
    queues = sch.queues
    head = dict.fromkeys(queues, 0)
    reading = dict.fromkeys(queues, 0)       # unstaged sends of the unit still in flight
    lane_wait = [len(o.after) for o in ops]
    lane_next = sch.lane_next
    outstanding = 0
    for o in sch.recvs:
        buf = rbuf[o.offset:o.offset + o.numel] if o.staged else _view(o, flat)
        pool.submit(wait, o.index, rc._post(o, buf))
        outstanding += 1

    def progress(todo: list[int]) -> None:
        nonlocal outstanding
        while todo:
            op = ops[todo.pop()]
            i = op.index
            if state[i] != IDLE:
                continue
            if op.kind == SEND:
                if lane_wait[i] or any(queues[u][head[u]] != i for u in op.units):
                    continue
                data = stage(op, flat, sbuf) if op.staged else _view(op, flat)
                t_post[i] = now()
                pool.submit(wait, i, rc._post(op, data))
                outstanding += 1
                state[i] = DONE if op.staged else POSTED
                if not op.staged:
                    for u in op.units:
                        reading[u] += 1
                advance(queues, head, op.units, todo)
            else:
                if not arrived[i] or any(queues[u][head[u]] != i or reading[u] for u in op.units):
                    continue
                if op.staged:
                    apply(op, flat, rbuf)
                state[i] = DONE
                advance(queues, head, op.units, todo)

    progress([q[0] for q in queues.values()] + [o.index for o in sch.sends if not o.after])
    deadline = now() + rc.timeout
    while outstanding:
        try:
            batch = [events.get(timeout=max(deadline - now(), 0.0))]
        except queue.Empty:
            stuck = next((o for o in ops if state[o.index] != DONE or not arrived[o.index]), None)
            raise rc._error(stuck, f"did not complete within {rc.timeout:g} s") from None
        while True:
            try:
                batch.append(events.get_nowait())
            except queue.Empty:
                break
        todo: list[int] = []
        for i, t, err in batch:
            outstanding -= 1
            if err is not None:
                raise rc._error(ops[i], f"failed: {err}") from err
            arrived[i] = True
            op = ops[i]
            if op.kind == RECV:
                t_done[i] = t
                todo.append(i)
                continue
            if state[i] == POSTED:          # an unstaged send left: writes of its units may go
                state[i] = DONE
                for u in op.units:
                    reading[u] -= 1
                    if not reading[u] and head[u] < len(queues[u]):
                        todo.append(queues[u][head[u]])
            for j in lane_next.get(i, ()):
                lane_wait[j] -= 1
                if not lane_wait[j]:
                    todo.append(j)
        progress(todo)
    if not all(s == DONE for s in state):
        stuck = next(o for o in ops if state[o.index] != DONE)
        raise rc._error(stuck, "could never run (its inputs never became ready)")
    return _times(sch, t_post, t_done)


def run_stepwise(rc, flat: torch.Tensor, sch: Schedule) -> tuple[list[float], list[float]]:
    """Run ``sch`` step by step, one ``batch_isend_irecv`` per step (see the module docstring).
    On CUDA everything (events, adds, the final synchronize) runs on ``flat``'s device and its
    current stream, whichever device the calling thread had selected."""
    if flat.is_cuda:
        with torch.cuda.device(flat.device):
            return _stepwise(rc, flat, sch)
    return _stepwise(rc, flat, sch)


def _stepwise(rc, flat: torch.Tensor, sch: Schedule) -> tuple[list[float], list[float]]:
    ops = sch.ops
    sbuf, rbuf = rc._arena(sch, flat)
    td = datetime.timedelta(seconds=rc.timeout)
    cuda = flat.is_cuda
    t_post, t_done = [0.0] * len(ops), [0.0] * len(ops)
    marks: list = []
    if cuda:
        base = torch.cuda.Event(enable_timing=True)
        base.record()
        base_t = time.monotonic()
    by_step: dict[int, list[SliceOp]] = {}
    for o in ops:
        by_step.setdefault(o.step, []).append(o)
    for t in sch.steps:
        mine = by_step[t]
        p2p = []
        for o in mine:
            if o.kind == SEND:
                buf = stage(o, flat, sbuf) if o.staged else _view(o, flat)
            else:
                buf = rbuf[o.offset:o.offset + o.numel] if o.staged else _view(o, flat)
            fn = dist.isend if o.kind == SEND else dist.irecv
            p2p.append(dist.P2POp(fn, buf, rc._global[o.peer], group=rc.group, tag=rc.tag_of(o)))
        if cuda:
            ev0 = torch.cuda.Event(enable_timing=True)
            ev0.record()
        t0 = time.monotonic()
        works = dist.batch_isend_irecv(p2p)
        # one request per op (Gloo), or one for the whole coalesced group (NCCL)
        for i, w in enumerate(works):
            try:
                w.wait(timeout=td)
            except Exception as e:  # noqa: BLE001
                o = mine[i] if len(works) == len(mine) else mine[0]
                why = "" if len(works) == len(mine) else f" (in the group of {len(mine)} flows of step {t})"
                raise rc._error(o, f"failed or timed out{why}: {e}") from e
        for o in mine:
            if o.kind == RECV and o.staged:
                apply(o, flat, rbuf)
        t1 = time.monotonic()
        for o in mine:
            t_post[o.index], t_done[o.index] = t0, t1
        if cuda:
            ev1 = torch.cuda.Event(enable_timing=True)
            ev1.record()
            marks.append((mine, ev0, ev1))
    if cuda:
        torch.cuda.current_stream().synchronize()
        for mine, ev0, ev1 in marks:
            a, b = base.elapsed_time(ev0) / 1e3, base.elapsed_time(ev1) / 1e3
            for o in mine:
                t_post[o.index], t_done[o.index] = base_t + a, base_t + b
    return _times(sch, t_post, t_done)


def _views(prog: DirectProgram, sch: Schedule, sbuf: torch.Tensor, rbuf: torch.Tensor) -> None:
    prog.arena = (sbuf, rbuf)
    prog.send_bufs = {o.index: sbuf[o.offset:o.offset + o.numel] if o.staged else None for o in sch.sends}
    prog.recv_bufs = {o.index: rbuf[o.offset:o.offset + o.numel] if o.staged else None for o in sch.recvs}


def _range(flat: torch.Tensor, lo: int, hi: int, n: int) -> torch.Tensor:
    return flat if lo == 0 and hi == n else flat[lo:hi]


def run_direct(rc, flat: torch.Tensor, sch: Schedule, prog: DirectProgram) -> tuple[list[float], list[float]]:
    """Replay ``prog`` (compiled from ``sch``) on ``flat`` over ``rc``'s group.

    Returns:
        ``(send start, receive end)`` per flow of ``sch.send_flows`` / ``sch.recv_flows``
        (``time.monotonic()`` seconds).

    Raises:
        FlowTimeoutError: a post was refused, a wait failed or passed the call's timeout, or
            (never for a verified pattern) an op could never run.
    """
    sbuf, rbuf = rc._arena(sch, flat)
    if prog.arena is None or prog.arena[0] is not sbuf or prog.arena[1] is not rbuf:
        _views(prog, sch, sbuf, rbuf)
    now = time.monotonic
    n = flat.numel()
    start = [float("inf")] * len(sch.send_flows)
    end = [0.0] * len(sch.recv_flows)
    recv_bufs, send_bufs = prog.recv_bufs, prog.send_bufs
    post = rc._post
    works: dict = {}
    deadline = now() + rc.timeout
    for op in sch.recvs:
        buf = recv_bufs[op.index]
        if buf is None:
            lo, hi = op.segs[0]
            buf = _range(flat, lo, hi, n)
        works[op.index] = post(op, buf)
    for code, op in prog.steps:
        if code == SENDS:
            out = send_bufs[op.index]
            if out is None:
                lo, hi = op.segs[0]
                out = _range(flat, lo, hi, n)
            elif len(op.segs) == 1:
                lo, hi = op.segs[0]
                out.copy_(_range(flat, lo, hi, n))
            else:
                k = 0
                for lo, hi in op.segs:
                    out[k:k + hi - lo].copy_(flat[lo:hi])
                    k += hi - lo
            t = now()
            if t < start[op.slot]:
                start[op.slot] = t
            works[op.index] = post(op, out)
        elif code == WAIT or code == SENT:
            _wait(rc, op, works.pop(op.index), deadline)
            if code == WAIT:
                t = now()
                if t > end[op.slot]:
                    end[op.slot] = t
        else:
            src = recv_bufs[op.index]
            k = 0
            for lo, hi in op.segs:
                part = src if hi - lo == op.numel else src[k:k + hi - lo]
                dst = _range(flat, lo, hi, n)
                if op.op == 0:
                    dst.add_(part)
                else:
                    dst.copy_(part)
                k += hi - lo
    if prog.stuck is not None:
        raise rc._error(prog.stuck, "could never run (its inputs never became ready)")
    return start, end


def _wait(rc, op: SliceOp, work, deadline: float) -> None:
    try:
        work.wait(timeout=datetime.timedelta(seconds=max(deadline - time.monotonic(), 1e-3)))
    except Exception as e:  # noqa: BLE001 - Gloo raises RuntimeError on timeout or a dead peer
        raise rc._error(op, f"did not complete within {rc.timeout:g} s or failed ({e})") from e

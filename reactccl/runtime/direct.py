"""The direct executor of small messages: a :class:`~reactccl.runtime.schedule.Schedule` with
``direct=True`` compiled once into a straight-line program, then run on the calling thread.

In a direct schedule every send is staged and no send waits for another to leave, and the
calling thread waits for the receives one after another in schedule order (step, flow,
part). What becomes runnable therefore changes only when the next receive is waited for,
so the order in which the data-driven rule (:mod:`reactccl.runtime.execute`: an op runs once
it heads every queue of its units; a received op once its data is there) runs the ops is the
same on every call. :func:`compile_direct` finds that order once, by running the rule on the
schedule without data, and writes it down as a list of steps:

* post every receive (straight into the tensor, or into its staging buffer);
* ``SEND op``: copy the op's ranges into its staging buffer, post it, note the time;
* ``WAIT op``: wait for the receive (bounded by what is left of the call's timeout), note the
  time;
* ``APPLY op``: add/copy a staged receive into the tensor (an in-place receive needs nothing);
* at the end, wait for the sends.

:func:`run_direct` replays that list; a call costs its posts, waits and copies and almost no
bookkeeping (at 4 B the bookkeeping was most of the call's CPU). The guarantees are those of
the data-driven executor: the same reads and writes in the same per-chunk order (so the
same bits), and no deadlock (the lowest receive still waited for always has its send posted
by its peer: sends depend only on receives before them in the same order). A receive's end
time is when this thread saw it: exact for one receive per step (ring), an upper bound where
a rank receives several flows in one step. A schedule whose ops could never all run (not
possible for a verified pattern) is refused at the point the data-driven executor refused it.

The posts go to the group's CPU backend (what ``ProcessGroup.send`` dispatches to, without
the dispatcher's hop: about 5 µs of CPU per op and a shorter hand-off, measured with Gloo).

Source: REACT §6.1 (RCollective posts the pattern's p2p operations); PyTorch c10d
``Backend.send``/``recv``/``Work.wait`` semantics.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass

import torch

from .layout import SEND
from .schedule import Schedule, SliceOp, advance

__all__ = ["DirectProgram", "compile_direct", "run_direct"]

SENDS, WAIT, APPLY = 0, 1, 2


@dataclass(eq=False)
class DirectProgram:
    """A direct schedule as a straight-line program (see the module docstring).

    Attributes:
        steps: ``(code, op)`` pairs in execution order (``SENDS``, ``WAIT``, ``APPLY``).
        stuck: the first op the rule could never run (None for a verified pattern).
        arena: the staging buffers the views below were cut from (rebuilt when they change).
        recv_bufs, send_bufs: per op index, its staging view (receives: None when in place).
    """

    steps: list
    stuck: SliceOp | None
    arena: tuple | None = None
    recv_bufs: dict | None = None
    send_bufs: dict | None = None


def compile_direct(sch: Schedule) -> DirectProgram:
    """The order in which the data-driven rule runs ``sch``'s ops when receives arrive in the
    order they are waited for (schedule order).

    Raises:
        ValueError: ``sch`` is not a direct schedule.
    """
    if not sch.direct:
        raise ValueError("compile_direct: the schedule is not a direct one (sends may wait for sends)")
    ops, queues = sch.ops, sch.queues
    head = dict.fromkeys(queues, 0)
    done = [False] * len(ops)
    arrived = [False] * len(ops)
    steps: list = []

    def run(todo: list[int]) -> None:
        while todo:
            op = ops[todo.pop()]
            i = op.index
            if done[i] or (op.kind != SEND and not arrived[i]):
                continue
            if any(queues[u][head[u]] != i for u in op.units):
                continue
            if op.kind == SEND:
                steps.append((SENDS, op))
            elif op.staged:
                steps.append((APPLY, op))
            done[i] = True
            advance(queues, head, op.units, todo)

    run([q[0] for q in queues.values()] + [o.index for o in sch.sends])
    for o in sch.recvs:
        steps.append((WAIT, o))
        arrived[o.index] = True
        run([o.index])
    stuck = next((o for o in ops if not done[o.index]), None)
    return DirectProgram(steps, stuck)


def _views(prog: DirectProgram, sch: Schedule, sbuf: torch.Tensor, rbuf: torch.Tensor) -> None:
    prog.arena = (sbuf, rbuf)
    prog.send_bufs = {o.index: sbuf[o.offset:o.offset + o.numel] for o in sch.sends}
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
    sent: list = []
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
            if len(op.segs) == 1:
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
            sent.append((op, post(op, out)))
        elif code == WAIT:
            _wait(rc, op, works[op.index], deadline)
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
    for op, work in sent:
        _wait(rc, op, work, deadline)
    if prog.stuck is not None:
        raise rc._error(prog.stuck, "could never run (its inputs never became ready)")
    return start, end


def _wait(rc, op: SliceOp, work, deadline: float) -> None:
    try:
        work.wait(timeout=datetime.timedelta(seconds=max(deadline - time.monotonic(), 1e-3)))
    except Exception as e:  # noqa: BLE001 - Gloo raises RuntimeError on timeout or a dead peer
        raise rc._error(op, f"did not complete within {rc.timeout:g} s or failed ({e})") from e

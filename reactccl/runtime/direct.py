"""The direct executor: a :class:`~reactccl.runtime.schedule.Schedule` with ``direct=True``
compiled once into a straight-line program, then run on the calling thread, with no waiter
threads and no driver loop.

The calling thread waits for the receives one after another in schedule order (step, flow,
part). What becomes runnable therefore changes only at its own waits, so the order in which
the data-driven rule (:mod:`reactccl.runtime.run_schedule`: an op runs once it heads every queue
of its units; a received op once its data is there and the unstaged sends of its units have
left; a send once its lane's sends of the previous step have left) runs the ops is the same
on every call. :func:`compile_direct` finds that order once, by running the rule on the
schedule without data, and writes it down as a list of steps:

* post every receive (straight into the tensor, or into its staging buffer);
* ``SENDS op``: copy the op's ranges into its staging buffer if it is staged, post it, note
  the time;
* ``WAIT op``: wait for the receive (bounded by what is left of the call's timeout), note the
  time;
* ``APPLY op``: add/copy a staged receive into the tensor (an in-place receive needs nothing);
* ``SENT op``: wait until a send has left, where the rule needs that (before an add/copy
  from a staging buffer into a chunk an unstaged send still reads; before the lane's next
  send), and for every send at the end. A copy received straight into the tensor lands when
  it arrives, whatever the program does: its safety is :func:`~reactccl.runtime.schedule.in_place_receives`'
  proof that its data cannot arrive before every send still reading the chunk has left.

An ``eager`` schedule (RCollective's messages up to 64 KiB, or up to ``direct_bytes`` if that
is smaller) stages every send and lets no
send wait for another, so its only ``SENT`` waits are at the end: there a wait in mid-call
costs more than the copies it saves (measured: nccl-tree at 64 KB took 4.0 ms of CPU per
call instead of 3.0 ms), and the rule is relaxed to "a send waits only for its data".

:func:`~reactccl.runtime.run_schedule.run_direct` replays that list (this module needs no
torch); a call costs its posts, waits and copies and almost no bookkeeping (at 4 B the
bookkeeping was most of the call's CPU; at 16 MB the thread hand-offs of the data-driven
executor cost about as much CPU as a staging copy of every send).

The guarantees are those of the data-driven executor: the same reads and writes in the same
per-chunk order (so the same bits), and no deadlock. Every rank posts all its receives on
entry, before any wait, so a ``SENT`` wait needs only the peer to have entered the call;
and the lowest receive still waited for always has its send posted by its peer (sends
depend only on receives before them in the same order, and on ``SENT`` waits). A receive's
end time is when this thread saw it. That is exact (up to the adds/copies in between) when
the rank receives from one peer, one flow per step, and no ``SENT`` before a ``WAIT`` can block
(:attr:`DirectProgram.exact`: a ring's are all for sends its earlier receives depend on);
otherwise it is an upper bound, e.g. where a rank receives several flows in one step, or where
a slow send of step t holds up the wait for step t+1. A schedule whose ops could never all run
(not possible for a verified pattern) is refused at the point the data-driven executor
refused it.

The posts go to the group's CPU backend (what ``ProcessGroup.send`` dispatches to, without
the dispatcher's hop: about 5 µs of CPU per op and a shorter hand-off, measured with Gloo).

Source: REACT §6.1 (RCollective posts the pattern's p2p operations); PyTorch c10d
``Backend.send``/``recv``/``Work.wait`` semantics; Gloo's TCP pairs, which send a message
once its receive is posted.
"""

from __future__ import annotations

from dataclasses import dataclass

from .layout import SEND
from .schedule import Schedule, SliceOp, advance

__all__ = ["DirectProgram", "compile_direct"]

SENDS, WAIT, APPLY, SENT = 0, 1, 2, 3


@dataclass(eq=False)
class DirectProgram:
    """A direct schedule as a straight-line program (see the module docstring).

    Attributes:
        steps: ``(code, op)`` pairs in execution order (``SENDS``, ``WAIT``, ``APPLY``, ``SENT``).
        stuck: the first op the rule could never run (None for a verified pattern).
        arena: the staging buffers the views below were cut from (rebuilt when they change).
        recv_bufs, send_bufs: per op index, its staging view (None where not staged).
        exact: no ``SENT`` wait before the last ``WAIT`` can block (each is for a send that a
            receive already waited for depends on, so it has provably left): then every wait
            for a receive starts no later than the data-driven executor would see it. None
            when not checked (``compile_direct`` without ``reaches``).
    """

    steps: list
    stuck: SliceOp | None
    exact: bool | None = None
    arena: tuple | None = None
    recv_bufs: dict | None = None
    send_bufs: dict | None = None


def compile_direct(sch: Schedule, reaches=None) -> DirectProgram:
    """The order in which the data-driven rule runs ``sch``'s ops when receives arrive in the
    order they are waited for (schedule order), with a ``SENT`` wait wherever the rule needs
    a send to have left, and one for every send not yet waited for at the end.

    ``reaches(target, f)`` (:func:`~reactccl.runtime.schedule.flow_reaches`), if given, sets
    :attr:`DirectProgram.exact`. A ``SENT`` that could block before a ``WAIT`` would delay when
    that receive is seen, so its end time would be an upper bound: a slow send would look
    like a slow receive. RCollective runs such a schedule on waiter threads instead.

    Raises:
        ValueError: ``sch`` is not a direct schedule.
    """
    if not sch.direct:
        raise ValueError("compile_direct: the schedule is not a direct one (build_schedule(..., direct=True))")
    ops, queues = sch.ops, sch.queues
    head = dict.fromkeys(queues, 0)
    done = [False] * len(ops)
    arrived = [False] * len(ops)
    left = [False] * len(ops)
    lane_wait = [len(o.after) for o in ops]
    reading: dict[int, set] = {u: set() for u in queues}   # unstaged sends of a unit not yet waited for
    steps: list = []

    def leave(j: int) -> None:
        if not left[j]:
            left[j] = True
            steps.append((SENT, ops[j]))
            if not ops[j].staged:
                for u in ops[j].units:
                    reading[u].discard(j)

    def run(todo: list[int]) -> None:
        while todo:
            op = ops[todo.pop()]
            i = op.index
            if done[i] or (op.kind != SEND and not arrived[i]) or lane_wait[i]:
                continue
            if any(queues[u][head[u]] != i for u in op.units):
                continue
            if op.kind == SEND:
                for j in op.after:
                    leave(j)
                steps.append((SENDS, op))
                if not op.staged:
                    for u in op.units:
                        reading[u].add(i)
                for j in sch.lane_next.get(i, ()):
                    lane_wait[j] -= 1
                    todo.append(j)
            else:
                for u in op.units:
                    for j in sorted(reading[u]):
                        leave(j)
                if op.staged:
                    steps.append((APPLY, op))
            done[i] = True
            advance(queues, head, op.units, todo)

    run([q[0] for q in queues.values()] + [o.index for o in sch.sends])
    for o in sch.recvs:
        steps.append((WAIT, o))
        arrived[o.index] = True
        run([o.index])
    for o in sch.sends:
        if done[o.index]:
            leave(o.index)
    stuck = next((o for o in ops if not done[o.index]), None)
    return DirectProgram(steps, stuck, exact=None if reaches is None else _exact(steps, reaches))


def _exact(steps: list, reaches) -> bool:
    """Whether every ``SENT`` before the last ``WAIT`` is for a send that a receive waited for
    earlier depends on (see :attr:`DirectProgram.exact`)."""
    last = max((i for i, (code, _) in enumerate(steps) if code == WAIT), default=-1)
    waited: list[int] = []
    for i, (code, op) in enumerate(steps[:last]):
        if code == WAIT:
            waited.append(op.flow)
        elif code == SENT and not any(reaches(op.flow, f) for f in reversed(waited)):
            return False
    return True

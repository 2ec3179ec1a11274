"""Flow traces of real runs, gathered to one rank for a trace file (``--trace``).

A rank alone knows when its sends started and its receives ended, not a flow's whole life
(:mod:`.records`), so a trace of real ranks is made where the records of every rank meet: the
RTuner's leader for :class:`~reactccl.torch.ReactAllReduce` and the DDP hook (it receives them
each control round anyway), and for ``perf`` rank 0 after the sweep (:func:`gather_traces`,
one gather of every kept call). One file per job, written by that rank; its processes are the
ranks (``pid`` per rank, :mod:`reactccl.tracefile`), its times rank 0's monotonic clock.
Source: ours; REACT §6.2 gathers FCTs at the leader the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.distributed as dist

from ..trace import EpochTrace
from .records import assemble_trace, record_from_wire, record_to_wire
from .wire import MAX_MESSAGE_BYTES, gather_json

__all__ = ["gather_traces", "MAX_TRACE_BYTES"]

#: Most bytes of kept records one rank sends to the writing rank (JSON): 16x a control message.
MAX_TRACE_BYTES = 16 * MAX_MESSAGE_BYTES


def gather_traces(collectives: Sequence, group=None, dst: int = 0) -> list[EpochTrace] | None:
    """Collective over ``group`` (every rank calls it, with its own objects in the same order):
    the records each :class:`~reactccl.runtime.RCollective` in ``collectives`` kept
    (:meth:`~reactccl.runtime.RCollective.keep_records`) go to group rank ``dst``, which joins them
    call by call into :class:`~reactccl.trace.EpochTrace` s (:func:`~reactccl.runtime.records.assemble_trace`),
    sorted by start (``meta["t0"]``). Other ranks get None.

    Raises:
        ValueError: ranks kept different numbers of calls of a collective, or records that do not
            join (another pattern, a rank missing).
        reactccl.runtime.wire.MessageError: one rank's records are over :data:`MAX_TRACE_BYTES`.
    """
    mine = [[record_to_wire(r) for r in rc.records()] for rc in collectives]
    root = dist.get_global_rank(group, dst) if group is not None else dst
    got = gather_json(mine, root, group=group, max_bytes=MAX_TRACE_BYTES)
    if got is None:
        return None
    traces = []
    for k, rc in enumerate(collectives):
        per_rank = [[record_from_wire(d) for d in ranks[k]] for ranks in got]
        calls = {len(x) for x in per_rank}
        if len(calls) != 1:
            raise ValueError(f"gather_traces: collective {k} ({rc.pattern.name}): ranks kept "
                             f"{[len(x) for x in per_rank]} calls")
        for j in range(calls.pop()):
            traces.append(assemble_trace(rc.pattern, [x[j] for x in per_rank]))
    traces.sort(key=lambda t: t.meta["t0"])
    return traces

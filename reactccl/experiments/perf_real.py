"""``perf`` on real ranks: every collective of the IR, ours and torch.distributed's, timed out of
place and in place and checked element by element, as nccl-tests does.

Buffers follow nccl-tests (``src/*.cu``, ``getCollByteCount``): a size of ``count`` elements is the
whole buffer for AllReduce, Broadcast and Reduce; for AllGather each rank sends ``base`` elements
and receives ``N * base``; for ReduceScatter the reverse; for AllToAll each rank sends and
receives ``N * base`` (``base`` from :func:`~reactccl.experiments.perf.nccl_count`). Our patterns
run in place (:class:`~reactccl.runtime.RCollective`: the whole message, a rank's block in place
for AllGather/ReduceScatter; :class:`~reactccl.runtime.alltoall.RAllToAll` for AllToAll); out of
place first copies the input into the output buffer (AllGather: into the rank's block;
ReduceScatter: into a work buffer whose block r is then copied out), which is how they would
serve an out-of-place call. torch.distributed's own collectives run beside them
(``dist.all_reduce``, ``all_gather_into_tensor``, ``reduce_scatter_tensor``, ``broadcast``,
``reduce``, ``all_to_all_single``); an in-place ``dist.all_to_all_single`` is timed but not checked
(#wrong N/A), as nccl-tests does not check in-place AllToAll (its ranks overwrite blocks their
peers still read).

The check (nccl-tests' ``-c``: that many checked runs after the timing, stopping at the first
with a wrong element) fills rank r's input element i with ``(r + 1) * (i % 7 + 1)`` and counts
the output elements that differ from the exact result: sums of such integers are exact in every
type (bfloat16 up to 8 ranks). Only output positions count (the root for Reduce, the rank's
block for ReduceScatter).

Timing (nccl-tests' ``-z``): 0 posts every iteration back to back and waits at the end; 1 waits
and joins a barrier after each (the barrier timed); 2 waits after each; 3 waits and joins a
barrier after each, the barrier not timed. Each rank's mean time per iteration is combined over
ranks by ``-a`` (:func:`~reactccl.experiments.perf.combine_times`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ..pattern import Collective
from .perf import DTYPES, PerfRow, check_dtype, combine_times, make_row, nccl_count, same_collective, with_root

__all__ = ["dist_sweep", "measure", "Op", "pattern_op", "dist_op", "expected_output", "DIST_NAMES"]


class Op:
    """One collective as perf runs it on this rank.

    ``run(out, inp)`` runs it out of place (``inp``: ``send`` elements, ``out``: ``recv``);
    ``run(buf, None)`` in place on one buffer of ``max(send, recv)`` elements that holds the input
    at ``in_off`` and gets the output at ``out_off`` (nccl-tests' in-place offsets: AllGather's
    input is the rank's block, ReduceScatter's output is).

    Attributes:
        name: the row's algorithm name; collective; root (or None); pattern (None for ``dist.*``);
        checked_in_place: False where the in-place run is timed but not checked.
    """

    def __init__(self, name: str, collective: Collective, root: int | None, count: int, rank: int, n: int,
                 run: Callable, checked_in_place: bool = True, pattern=None) -> None:
        self.name, self.collective, self.root, self.pattern = name, collective, root, pattern
        self.run, self.checked_in_place = run, checked_in_place
        blocked = collective.is_blocked
        self.send = n * count if collective in (Collective.REDUCESCATTER, Collective.ALLTOALL) else count
        self.recv = n * count if collective in (Collective.ALLGATHER, Collective.ALLTOALL) else count
        self.in_off = rank * count if collective is Collective.ALLGATHER else 0
        self.out_off = rank * count if collective is Collective.REDUCESCATTER else 0
        self.buf = max(self.send, self.recv) if blocked else count


def pattern_op(rc, coll: Collective, count: int, rank: int, n: int, name: str, work=None) -> Op:
    """An :class:`Op` running our pattern through ``rc`` (an RCollective, or an RAllToAll for
    AllToAll); ``work`` is ReduceScatter's out-of-place work buffer (``n * count`` elements)."""
    blk = slice(rank * count, (rank + 1) * count)

    def run(out, inp):
        if coll is Collective.ALLTOALL:
            return rc(out, out if inp is None else inp)
        if inp is None:                       # in place: our runtime's own convention
            return rc(out)
        if coll is Collective.REDUCESCATTER:
            work.copy_(inp)
            rc(work)
            return out.copy_(work[blk])
        (out[blk] if coll is Collective.ALLGATHER else out).copy_(inp)
        return rc(out)

    return Op(name, coll, rc.pattern.root, count, rank, n, run, pattern=rc.pattern)


DIST_NAMES = {Collective.ALLREDUCE: "all_reduce", Collective.ALLGATHER: "all_gather_into_tensor",
              Collective.REDUCESCATTER: "reduce_scatter_tensor", Collective.BROADCAST: "broadcast",
              Collective.REDUCE: "reduce", Collective.ALLTOALL: "all_to_all_single"}


def dist_op(coll: Collective, count: int, rank: int, n: int, root: int, group=None) -> Op:
    """An :class:`Op` running torch.distributed's own collective (``dist.<name>``, :data:`DIST_NAMES`)."""
    import torch.distributed as dist
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    blk = slice(rank * count, (rank + 1) * count)

    def run(out, inp):
        if coll is Collective.ALLGATHER:
            return gather(out, out[blk] if inp is None else inp, group=group)
        if coll is Collective.REDUCESCATTER:
            return scatter(out[blk], out, group=group) if inp is None else scatter(out, inp, group=group)
        if coll is Collective.ALLTOALL:
            return dist.all_to_all_single(out, out if inp is None else inp, group=group)
        if inp is not None:
            out.copy_(inp)
        if coll is Collective.ALLREDUCE:
            return dist.all_reduce(out, group=group)
        if coll is Collective.BROADCAST:
            return dist.broadcast(out, src=root, group=group)
        return dist.reduce(out, dst=root, group=group)

    return Op(f"dist.{DIST_NAMES[coll]}", coll, root if coll.needs_root else None, count, rank, n, run,
              checked_in_place=coll is not Collective.ALLTOALL)


def _values(count: int, rank: int, dtype, device):
    """Rank ``rank``'s input: ``(rank + 1) * (i % 7 + 1)`` for i < count, in ``dtype``."""
    import torch
    i = torch.arange(count, device=device)
    return ((i % 7 + 1) * (rank + 1)).to(dtype)


def expected_output(coll: Collective, count: int, rank: int, n: int, root: int | None, dtype, device):
    """``(expected output, checked)``: what this rank's output must hold after a check run, and
    whether this rank's output is checked at all (Reduce: only the root's)."""
    import torch
    tri = n * (n + 1) // 2
    i = torch.arange(n * count if coll in (Collective.ALLGATHER, Collective.ALLTOALL) else count, device=device)
    if coll in (Collective.ALLREDUCE, Collective.REDUCE):
        return ((i % 7 + 1) * tri).to(dtype), coll is Collective.ALLREDUCE or rank == root
    if coll is Collective.BROADCAST:
        return ((i % 7 + 1) * (int(root or 0) + 1)).to(dtype), True
    if coll is Collective.REDUCESCATTER:        # input element r*count + k of every rank, summed
        return (((rank * count + i) % 7 + 1) * tri).to(dtype), True
    blk, k = i // count, i % count
    if coll is Collective.ALLGATHER:           # block j: rank j's input
        return ((k % 7 + 1) * (blk + 1)).to(dtype), True
    return (((rank * count + k) % 7 + 1) * (blk + 1)).to(dtype), True   # AllToAll: block s = rank s's block r


def measure(op: Op, count: int, dtype, device, iters: int, warmup: int, in_place: bool, group=None,
            sync: Callable[[], None] | None = None, checks: int = 1, blocking: int = 0,
            average: int = 1) -> tuple[float, int | None]:
    """Time and check ``op`` on this rank (module docstring). Every rank calls it.

    Returns:
        ``(seconds per iteration combined over ranks by average, wrong elements summed over ranks)``;
        wrong is None with ``checks=0`` or where the in-place run is not checked.
    """
    import torch
    import torch.distributed as dist
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    sync = sync or (lambda: None)
    if in_place:
        buf = torch.zeros(op.buf, dtype=dtype, device=device)
        args: tuple = (buf, None)
    else:
        out, inp = torch.zeros(op.recv, dtype=dtype, device=device), torch.zeros(op.send, dtype=dtype, device=device)
        args = (out, inp)
    for _ in range(warmup):
        op.run(*args)
    sync()
    dist.barrier(group)
    t0, excluded = time.perf_counter(), 0.0
    for _ in range(iters):
        op.run(*args)
        if blocking:
            sync()
            if blocking in (1, 3):
                b = time.perf_counter()
                dist.barrier(group)
                if blocking == 3:
                    excluded += time.perf_counter() - b
    sync()
    elapsed = (time.perf_counter() - t0 - excluded) / max(iters, 1)
    checked = checks > 0 and (op.checked_in_place or not in_place)
    wrong = 0
    for _ in range(checks if checked else 0):
        x = _values(op.send, rank, dtype, device)
        if in_place:
            buf.zero_()
            buf[op.in_off:op.in_off + op.send].copy_(x)
            op.run(buf, None)
            got = buf[op.out_off:op.out_off + op.recv]
        else:
            out.zero_()
            op.run(out, x)
            got = out
        sync()
        expect, mine = expected_output(op.collective, count, rank, n, op.root, dtype, device)
        total = torch.tensor([float((got != expect).sum().item()) if mine else 0.0], dtype=torch.float64,
                             device=device)
        dist.all_reduce(total, group=group)
        wrong = int(round(total.item()))
        if wrong:
            break
    times = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(n)]
    dist.all_gather(times, torch.tensor([elapsed], dtype=torch.float64, device=device), group=group)
    return combine_times([float(t.item()) for t in times], average), (wrong if checked else None)




def _write_trace(path: str, collectives: list, group) -> None:
    """Gather the kept calls of ``collectives`` to rank 0, which writes ``path`` (collective)."""
    from ..runtime.tracing import gather_traces
    from ..tracefile import TraceRun, write_chrome_trace
    traces = gather_traces(collectives, group)
    if traces is not None:
        write_chrome_trace(path, [TraceRun.on_clock("perf", traces, unit="call")],
                           metadata={"command": "reactccl perf (real ranks)"})


def _torch_dtype(dtype: str):
    import torch
    return {"int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
            "half": torch.float16, "float": torch.float32, "double": torch.float64,
            "bfloat16": torch.bfloat16}[dtype]


def dist_sweep(algorithms: Sequence[str], sizes: Sequence[int], iters: int = 20, warmup: int = 1,
               dtype: str = "float", options: dict | None = None, include_dist: bool = True, group=None,
               timeout: float = 60.0, check: int = 1, root: int = 0, blocking: int = 0,
               average: int = 1, trace_to: str | None = None) -> list[PerfRow]:
    """Each algorithm (and torch.distributed's own collective) at each size on the real ranks of
    ``group``, out of place then in place (module docstring).

    Call on every rank (after ``init_process_group``); every rank gets the same rows. ``check`` is
    nccl-tests' ``-c`` (checked runs per size and placement, 0 = none). The pattern is generated for
    each size (``nccl-tree`` slices by NCCL's chunk rule) and one RCollective kept per pattern.
    ``trace_to``: every call of our patterns (warm-up, timed and checked, out of place and in place)
    keeps its flow times; after the sweep they are gathered to rank 0
    (:func:`reactccl.runtime.tracing.gather_traces`), which writes them to this file as Chrome
    trace-event JSON (:mod:`reactccl.tracefile`; one ``call`` slice per call, a track per rank).
    Keeping costs a list append per call; torch.distributed's own collective has no flows to show.

    Raises:
        ValueError: algorithms of different collectives, or a dtype or smallest size that
            :func:`~reactccl.experiments.perf.check_dtype` refuses (``real=True``).
    """
    import torch
    import torch.distributed as dist

    from ..algorithms import generate
    from ..runtime.alltoall import RAllToAll
    from ..runtime.rcollective import RCollective
    check_dtype(dtype, min(sizes, default=DTYPES.get(dtype, 1)), real=True)
    coll = same_collective(algorithms)
    tdtype = _torch_dtype(dtype)
    n, rank = dist.get_world_size(group), dist.get_rank(group)
    if dist.get_backend(group) == "nccl":
        device, sync = torch.device("cuda", torch.cuda.current_device()), torch.cuda.synchronize
    else:
        device, sync = torch.device("cpu"), None
    made: dict[str, Any] = {}
    rows: list[PerfRow] = []

    def timed(op: Op, nbytes: int, count: int, pattern=None) -> None:
        res = [measure(op, count, tdtype, device, iters, warmup, ip, group=group, sync=sync, checks=check,
                       blocking=blocking, average=average) for ip in (False, True)]
        rows.append(make_row(op.name, coll, n, nbytes, count, dtype, op.root, res[0], res[1], pattern))

    try:
        names = list(algorithms) + (["dist"] if include_dist else [])
        for name in names:
            for size in sizes:
                nbytes, count = nccl_count(coll, size, dtype, n)
                if count < 1:
                    continue
                if name == "dist":
                    timed(dist_op(coll, count, rank, n, root, group), nbytes, count)
                    continue
                p = generate(name, n, size=float(nbytes), **with_root(name, root, options))
                rc = made.get(p.name)
                if rc is None:
                    kind = RAllToAll if coll is Collective.ALLTOALL else RCollective
                    rc = made[p.name] = kind(p, group, timeout=timeout, check="never")
                    if trace_to:
                        inner = getattr(rc, "collective", rc)    # RAllToAll runs an RCollective
                        inner.keep_records()
                        inner.sync_clock()
                work = torch.empty(n * count, dtype=tdtype, device=device) \
                    if coll is Collective.REDUCESCATTER else None
                timed(pattern_op(rc, coll, count, rank, n, name, work), nbytes, count, p)
        if trace_to:
            _write_trace(trace_to, [getattr(rc, "collective", rc) for rc in made.values()], group)
    finally:
        for rc in made.values():
            rc.close()
    return rows

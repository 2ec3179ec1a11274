"""RCollective: run any verified collective pattern as a real collective on torch.distributed.

Every rank calls ``RCollective(pattern, group)(tensor)`` with its flat message
(the whole message, nccl-tests' in-place convention: for AllGather rank r's
input sits in block r, for ReduceScatter rank r's output ends in block r; see
:func:`reactccl.runtime.layout.block_bounds`). Chunks are views of the tensor
(:func:`~reactccl.runtime.layout.chunk_bounds`); a ``reduce`` flow adds into
the receiver's chunks, a ``copy`` flow overwrites them.

Execution (details in :mod:`reactccl.runtime.schedule` and :mod:`reactccl.runtime.run_schedule`).
Each rank turns the pattern into a :class:`~reactccl.runtime.schedule.Schedule`: every chunk
cut into pipeline parts (about ``pipeline_bytes`` each; off by default), every flow into one
op per part.

* Gloo, CPU tensors (data-driven): all receives are posted at the start, a copy straight into
  the tensor where that is provably safe, everything else into a staging buffer; a send is
  posted as soon as the writes before it in its chunks are applied, straight from the tensor
  unless this rank writes the chunk in the same step (then it is staged: the pre-step value);
  a received part is added/copied in once it arrived and the ops before it in its chunks are
  done. Waiting: every rank for messages up to 64 KiB, and above that a rank that receives
  from one peer only, at most one flow per step
  (:func:`~reactccl.runtime.schedule.receives_in_order`), and whose compiled program provably
  never blocks a receive's wait on a send (every rank of a ring of up to about 220 ranks,
  where the proof's budget ends),
  waits for its receives and sends on the calling thread, replaying the order of ops
  compiled once per schedule (:mod:`reactccl.runtime.direct`); other ranks (a tree's inner
  and leaves, whose two chunk graphs must progress independently: waiting for one tree's
  receive in step order held the other tree's sends back, and on the emulated testbed cost
  REACT its gain; recursive doubling) wait on waiter threads (a Gloo request only completes
  when someone waits on it), whose reports the driver handles in batches, so each receive's
  end time is exact.
* CUDA tensors (NCCL): step by step, a step's sends and receives as one ``batch_isend_irecv``
  group (NCCL's group call, which makes a ring of sends and receives deadlock-free), timed by
  CUDA events. ``mode="stepwise"`` runs this path on Gloo too, which is how CI tests it without
  a GPU (the NCCL test itself needs two GPUs). NCCL wants the first call on a group to be a
  collective: keep ``check`` on (its all-gather comes first).

Posting order against the project's execution model (within one chunk graph a rank's sends
go in step order: a send starts once its data has arrived and the rank's sends of earlier
steps in that chunk graph have left; sends of one step go together; chunk graphs run
concurrently). Both Gloo executors follow it, with one refinement: each pipeline part of a
chunk graph is a chunk graph of its own (part j of step t+1 may leave while part j+1 of step
t is in flight, as NCCL's slices do), and one relaxation: messages run eagerly (up to 64 KiB,
and up to ``direct_bytes`` if that is smaller) stage every send and let no send wait for
another ("have left" becomes "have been posted"). The direct executor blocks its thread on
a lane's earlier sends just before it posts the next one; the waiter threads report them
instead, so the driver may meanwhile handle other arrivals. The step-by-step executor is
stricter than the rule: a step starts when all of this rank's previous step is done, across
chunk graphs.

Exactness: integer dtypes give exactly ``dist.all_reduce``'s result. Floats
(float32/float16/bfloat16) are summed in the tensor's dtype, each (rank,
chunk) in one fixed order (step, then flow id), so a rank's result does not
depend on timing. Every rank holds bit-identical results when the pattern
computes each final value once and copies it (ring, tree, Broadcast) or
computes it symmetrically (recursive doubling: a+b on one side, b+a on the
other). The error against a float64 reference is at most
``gamma(N-1) * sum_i |x_i|`` per element, with ``gamma(k) = k*u / (1 - k*u)`` and
``u`` the unit roundoff (2^-24 float32, 2^-11 float16, 2^-8 bfloat16): every
summation order of N terms obeys it (Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., §4.2, eq. 4.4).

Source: REACT §6.1 and Appendix B.1 (Algorithm 2).
"""

from __future__ import annotations

import datetime
import logging
import time
import zlib
from collections import OrderedDict

import numpy as np
import torch
import torch.distributed as dist

from ..errors import ReactcclError
from ..pattern import CollectivePattern, pattern_digest, verify
from .clock import clock_offset
from .direct import compile_direct
from .run_schedule import run_data, run_direct, run_stepwise
from .layout import SEND, block_bounds, chunk_bounds
from .schedule import Schedule, SliceOp, build_schedule, choose_parts, flow_reaches, receives_in_order
from .waiters import Waiters
from .records import LocalRecord, assemble_trace, record_from_wire, record_to_wire
from .wire import all_gather_json

log = logging.getLogger("reactccl.runtime")

__all__ = ["RCollective", "FlowTimeoutError", "MismatchError", "pattern_digest", "TAG_BASE"]

TAG_BASE = 1 << 20
_PROOF_BUDGET = 50_000  # flows the direct executor's exactness proof may look at per schedule (<~0.5 s)
_TINY = 64 << 10  # bytes: up to here the direct executor is used even where receive times become upper bounds
_CACHE = 16


class FlowTimeoutError(ReactcclError, RuntimeError):
    """A flow did not complete (or failed) within the timeout.

    Attributes: ``rank`` (who noticed), ``flow``, ``step``, ``peer``, ``chunks``.
    """

    def __init__(self, message: str, rank: int, op: SliceOp | None) -> None:
        super().__init__(message)
        self.rank = rank
        self.flow = None if op is None else op.flow
        self.step = None if op is None else op.step
        self.peer = None if op is None else op.peer
        self.chunks = None if op is None else op.chunks.tolist()


class MismatchError(ReactcclError, RuntimeError):
    """Ranks called the collective with different sizes, dtypes, devices or patterns."""


def _dtype_code(dtype: torch.dtype) -> int:
    return zlib.crc32(str(dtype).encode())


class RCollective:
    """A collective pattern bound to a process group.

    Args:
        pattern: a verified pattern whose ranks are the group's ranks
            (``pattern.num_ranks == group size``).
        group: the process group (default: the default group).
        timeout: seconds every wait may take; a flow that does not complete in
            that time raises :class:`FlowTimeoutError` naming step, peer and chunks.
        check: ``"change"`` (default) all-gathers ``(numel, dtype, device,
            pattern digest)`` the first time a combination is used and raises
            :class:`MismatchError` if ranks disagree; ``"always"`` does it every
            call; ``"never"`` skips it.
        mode: ``"auto"`` (data-driven on Gloo, stepwise on NCCL), ``"data"`` or
            ``"stepwise"``.
        verify_patterns: run :func:`reactccl.pattern.verify` on every pattern
            given (default True; a wrong pattern would silently give wrong sums).
        pipeline_bytes: target bytes per pipeline part: each chunk is cut into
            ``round(largest chunk bytes / pipeline_bytes)`` parts (1 to ``max_parts``);
            None (default) turns pipelining off. Data-driven executor only. Off by
            default because on the 2-core development machine it cost more (CPU per extra
            op and thread wake) than the overlap bought (``bench_runtime.py --ablations``,
            ``+pipe`` columns); the overlap needs a core free for the transport.
        max_parts: the most parts per chunk.
        staging: ``"needed"`` (default: stage a send only where this rank writes its
            chunk in the same step or it covers several ranges) or ``"always"`` (every
            send and receive through a buffer, as before these options existed).
        in_place: receive copy flows straight into the tensor where that is safe.
        direct_bytes: the largest message (bytes) run on the calling thread, with no waiter
            threads (:mod:`reactccl.runtime.direct`); None (default) = no limit, 0 = never.
            Up to 64 KiB (or this, if smaller) every rank does, with every send staged and
            no send waiting for another (``eager``; a receive's end time may then be an
            upper bound). Above that, only a rank that receives from one peer, at most one
            flow per step, and whose program is exact (:attr:`~reactccl.runtime.direct.DirectProgram.exact`:
            ring ranks); the others use waiter threads. Measured on 4 Gloo ranks (``bench_runtime.py --ablations``,
            ``-direct``): most of the 4 B .. 64 KB gain, and at 16 MB 7-12% less CPU per
            call than the waiter threads, whose hand-offs cost about what a staging copy of
            every send would.

    Raises:
        ValueError: pattern and group sizes differ, or a bad option.
        VerificationError: the pattern does not compute its collective.

    A REACT swap is :meth:`set_pattern` with a relabelled pattern: the group
    (and its connections) stays the same.
    """

    def __init__(self, pattern: CollectivePattern, group=None, timeout: float = 60.0,
                 check: str = "change", mode: str = "auto", verify_patterns: bool = True, *,
                 pipeline_bytes: int | None = None, max_parts: int = 8, staging: str = "needed",
                 in_place: bool = True, direct_bytes: int | None = None) -> None:
        if not dist.is_initialized():
            raise RuntimeError("RCollective: torch.distributed is not initialised (call init_process_group)")
        if check not in ("change", "always", "never"):
            raise ValueError(f"check: expected 'change', 'always' or 'never', got {check!r}")
        if mode not in ("auto", "data", "stepwise"):
            raise ValueError(f"mode: expected 'auto', 'data' or 'stepwise', got {mode!r}")
        if not timeout > 0:
            raise ValueError(f"timeout: must be > 0 seconds, got {timeout}")
        if staging not in ("needed", "always"):
            raise ValueError(f"staging: expected 'needed' or 'always', got {staging!r}")
        if pipeline_bytes is not None and not pipeline_bytes > 0:
            raise ValueError(f"pipeline_bytes: must be > 0 bytes or None, got {pipeline_bytes}")
        if max_parts < 1:
            raise ValueError(f"max_parts: must be >= 1, got {max_parts}")
        self.pipeline_bytes, self.max_parts = pipeline_bytes, int(max_parts)
        self.staging, self.in_place = staging, bool(in_place)
        if direct_bytes is not None and not direct_bytes >= 0:
            raise ValueError(f"direct_bytes: must be >= 0 bytes or None, got {direct_bytes}")
        self.direct_bytes = None if direct_bytes is None else int(direct_bytes)
        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self._global = [dist.get_global_rank(group, r) if group is not None else r for r in range(self.world)]
        self.timeout = float(timeout)
        self.check, self.mode, self.verify_patterns = check, mode, verify_patterns
        self._plans: OrderedDict = OrderedDict()
        self._checked: OrderedDict = OrderedDict()
        self._hot: dict = {}        # (numel, dtype, device) -> plan, for the current pattern, checked
        self._cpu_p2p = None        # the group's CPU backend's (send, recv), found at the first post
        self._buffers: dict = {}
        self._pool = Waiters()
        self._pg = group if group is not None else dist.group.WORLD
        self.calls = 0
        self.clock_offset: float | None = None  # to rank 0's clock; see sync_clock
        self._raw: tuple | None = None
        self._record: LocalRecord | None = None
        self._kept: list[tuple] | None = None   # every call's times, while keep_records is on
        self.set_pattern(pattern)

    # ------------------------------------------------------------ pattern
    @property
    def pattern(self) -> CollectivePattern:
        """The pattern the next call runs."""
        return self._pattern

    def set_pattern(self, pattern: CollectivePattern) -> None:
        """Run ``pattern`` from the next call on (every rank must switch at the same call).

        Raises:
            ValueError: its rank count differs from the group's size, or it is a
                different collective than the current pattern.
            VerificationError: it does not compute its collective (``verify_patterns``).
        """
        if not isinstance(pattern, CollectivePattern):
            raise TypeError(f"pattern: expected a CollectivePattern, got {type(pattern).__name__}")
        if pattern.num_ranks != self.world:
            raise ValueError(f"pattern has {pattern.num_ranks} ranks but the process group has {self.world}")
        old = getattr(self, "_pattern", None)
        if old is not None and old.collective != pattern.collective:
            raise ValueError(f"set_pattern: cannot change the collective from {old.collective.value} to "
                             f"{pattern.collective.value}")
        if self.verify_patterns:
            verify(pattern)
        self._pattern = pattern
        self.digest = pattern_digest(pattern)
        self._hot = {}

    @property
    def last_record(self) -> LocalRecord | None:
        """This rank's :class:`LocalRecord` of the last call (None before the first): its flows'
        start/end times, built from the times the call kept when first asked for."""
        if self._record is None and self._raw is not None:
            self._record = self._record_of(self._raw)
        return self._record

    def _record_of(self, raw: tuple) -> LocalRecord:
        epoch, enter, leave, sch, sent_t, recv_t, esize, digest, offset = raw
        return LocalRecord(self.rank, epoch, enter, leave, sch.send_flows, np.array(sent_t, dtype=np.float64),
                           sch.send_elems * esize, sch.recv_flows, np.array(recv_t, dtype=np.float64),
                           sch.numel * esize, digest, offset)

    def keep_records(self, on: bool = True) -> None:
        """Keep the times of every later call, not only the last, for :meth:`records` (tracing:
        ``perf --trace``); ``on=False`` stops and drops them. A call then costs one list append."""
        self._kept = [] if on else None

    def records(self) -> list[LocalRecord]:
        """This rank's :class:`LocalRecord` of every call since :meth:`keep_records`, in call order
        (built now from the kept times); empty when not keeping."""
        return [self._record_of(raw) for raw in self._kept or []]

    # --------------------------------------------------------------- call
    def __call__(self, tensor: torch.Tensor, epoch: int | None = None) -> torch.Tensor:
        """Run the collective in place on ``tensor`` (any shape; treated as flat).

        Returns:
            ``tensor`` (modified in place).

        Raises:
            MismatchError: ranks disagree on element count, dtype, device type or pattern.
            FlowTimeoutError: a flow did not complete within ``timeout`` seconds
                (a dead or stalled peer), naming the step, the peer and the chunks.
                Requests still posted then stay with the group: treat the group as
                broken (destroy it) after this error.
        """
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor: expected a torch.Tensor, got {type(tensor).__name__}")
        flat = tensor.view(-1) if tensor.is_contiguous() else tensor.contiguous().view(-1)
        key = (flat.numel(), flat.dtype, flat.device)
        plan = self._hot.get(key)
        if plan is None or self.check == "always":
            plan = self._plan(flat)
        sch, prog, stepwise = plan
        enter = time.monotonic()  # the trace times the data movement, not the check or planning
        if prog is not None:
            sent_t, recv_t = run_direct(self, flat, sch, prog)
        else:
            sent_t, recv_t = (run_stepwise if stepwise else run_data)(self, flat, sch)
        if flat.data_ptr() != tensor.data_ptr():
            tensor.copy_(flat.view_as(tensor))
        # the record is built when asked for (last_record): a call only keeps its times
        self._raw = (self.calls if epoch is None else int(epoch), enter, time.monotonic(), sch, sent_t, recv_t,
                     flat.element_size(), self.digest, self.clock_offset or 0.0)
        self._record = None
        if self._kept is not None:
            self._kept.append(self._raw)
        self.calls += 1
        return tensor

    def block(self, tensor: torch.Tensor, rank: int | None = None) -> torch.Tensor:
        """The view of ``tensor`` (flat, contiguous) that is ``rank``'s block (default this rank):
        AllGather's input / ReduceScatter's output place, ``[r*n//N, (r+1)*n//N)``."""
        r = self.rank if rank is None else int(rank)
        b = block_bounds(self.world, tensor.numel())
        return tensor.view(-1)[int(b[r]):int(b[r + 1])]

    def gather_trace(self, group=None):
        """All ranks' records of the last call joined into an :class:`EpochTrace` (collective
        over ``group``, default this collective's group; every rank gets the trace)."""
        if self.last_record is None:
            raise RuntimeError("gather_trace: no call has run yet")
        group = group if group is not None else self.group
        if self.clock_offset is None:
            self.sync_clock(group)
            self.last_record.clock_offset = self.clock_offset
        # plain JSON data, never pickles (see runtime/wire.py)
        recs = [record_from_wire(d) for d in all_gather_json(record_to_wire(self.last_record), group=group)]
        return assemble_trace(self._pattern, recs)

    def sync_clock(self, group=None) -> float:
        """Measure this rank's offset to rank 0's clock (collective over ``group``, a Gloo
        group; default this collective's group); later records carry it. 0 on one machine."""
        self.clock_offset = clock_offset(group if group is not None else self.group)
        return self.clock_offset

    def close(self, timeout: float = 10.0) -> None:
        """Stop the waiter threads and wait up to ``timeout`` seconds for them (idle ones end
        at once): none may still be running when the interpreter exits (see
        :mod:`.waiters`). A thread still blocked on a failed peer is named in a warning."""
        stuck = self._pool.close(timeout)
        if stuck:
            log.warning("rank %d: %d waiter thread(s) still blocked after %g s at close: %s", self.rank,
                        len(stuck), timeout, ", ".join(stuck))

    # ------------------------------------------------------------ helpers
    def _plan(self, flat: torch.Tensor) -> tuple:
        """Check agreement (as ``check`` says) and find the schedule and its executor for
        ``flat``; remembered per (numel, dtype, device) until the pattern changes, so a
        repeated call costs one dictionary look-up before its first post."""
        self._check_agreement(flat)
        stepwise = self.mode == "stepwise" or (self.mode == "auto" and flat.is_cuda)
        plan = (*self._schedule(flat.numel(), flat.element_size(), stepwise), stepwise)
        if len(self._hot) >= _CACHE:
            self._hot.clear()
        self._hot[(flat.numel(), flat.dtype, flat.device)] = plan
        return plan

    def _schedule(self, numel: int, element_size: int, stepwise: bool) -> tuple[Schedule, object]:
        """The schedule for a message (cached per pattern, size and executor) and, for a
        direct one, its compiled program (:func:`~reactccl.runtime.direct.compile_direct`)."""
        key = (self.digest, numel, element_size, stepwise)
        sch = self._plans.get(key)
        if sch is None:
            parts = 1 if stepwise else choose_parts(self._pattern, numel, element_size, self.pipeline_bytes,
                                                    self.max_parts)
            nbytes = numel * element_size
            cap = self.direct_bytes
            allowed = not stepwise and cap != 0 and (cap is None or nbytes <= cap)
            tiny = allowed and nbytes <= _TINY     # eager: sends staged, none waits for another
            direct = tiny or (allowed and receives_in_order(self._pattern, self.rank))
            sch = build_schedule(self._pattern, self.rank, numel, parts, self.staging, self.in_place, stepwise,
                                 direct=direct, eager=tiny)
            prog = None
            if tiny:
                prog = compile_direct(sch)
            elif direct:    # only where its receive times stay exact (no SENT can block a WAIT)
                reaches = flow_reaches(self._pattern, chunk_bounds(self._pattern, numel), _PROOF_BUDGET)
                prog = compile_direct(sch, reaches)
                if not prog.exact:      # the same schedule, run on waiter threads
                    sch.direct, prog = False, None
            sch = (sch, prog)
            self._plans[key] = sch
            if len(self._plans) > _CACHE:
                self._plans.popitem(last=False)
        else:
            self._plans.move_to_end(key)
        return sch

    def _arena(self, sch: Schedule, flat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Staging buffers for ``sch`` (grown as needed, one pair per dtype and device)."""
        key = (flat.dtype, flat.device)
        bufs = self._buffers.get(key)
        if bufs is None or bufs[0].numel() < sch.send_numel or bufs[1].numel() < sch.recv_numel:
            n0 = max(sch.send_numel, 0 if bufs is None else bufs[0].numel())
            n1 = max(sch.recv_numel, 0 if bufs is None else bufs[1].numel())
            bufs = (torch.empty(n0, dtype=flat.dtype, device=flat.device),
                    torch.empty(n1, dtype=flat.dtype, device=flat.device))
            self._buffers[key] = bufs
        return bufs

    def _check_agreement(self, flat: torch.Tensor) -> None:
        key = (flat.numel(), flat.dtype, flat.device.type, self.digest)
        if self.check == "never" or (self.check == "change" and key in self._checked):
            return
        mine = torch.tensor([flat.numel(), _dtype_code(flat.dtype), zlib.crc32(flat.device.type.encode()),
                             self.digest], dtype=torch.int64, device=flat.device)
        allv = [torch.empty_like(mine) for _ in range(self.world)]
        work = dist.all_gather(allv, mine, group=self.group, async_op=True)
        try:
            work.wait(timeout=datetime.timedelta(seconds=self.timeout))
        except Exception as e:  # noqa: BLE001 - reworded: the usual cause is a rank not calling
            raise MismatchError(
                f"RCollective on rank {self.rank}: the agreement check ({flat.numel()} elements of {flat.dtype}, "
                f"pattern digest {self.digest:x}) did not complete within {self.timeout:g} s; some rank is not "
                f"calling the collective, or calls it with other arguments it already checked ({e})") from e
        rows = torch.stack(allv).cpu().numpy()
        bad = np.flatnonzero((rows != rows[self.rank]).any(axis=1))
        if bad.size:
            other = rows[bad[0]]
            what = []
            if other[0] != rows[self.rank, 0]:
                what.append(f"{rows[self.rank, 0]} elements here, {other[0]} on rank {bad[0]}")
            if other[1] != rows[self.rank, 1]:
                what.append(f"dtype {flat.dtype} here differs from rank {bad[0]}'s")
            if other[2] != rows[self.rank, 2]:
                what.append(f"device type {flat.device.type} here differs from rank {bad[0]}'s")
            if other[3] != rows[self.rank, 3]:
                what.append(f"pattern digest {rows[self.rank, 3]:x} here, {other[3]:x} on rank {bad[0]}")
            raise MismatchError(f"RCollective on rank {self.rank}: ranks called the collective with different "
                                f"arguments ({'; '.join(what)}); ranks in disagreement: {bad.tolist()}")
        self._checked[key] = True
        if len(self._checked) > 4 * _CACHE:
            self._checked.popitem(last=False)

    def _waiters(self, n: int) -> Waiters:
        return self._pool.ensure(n)

    def _error(self, op: SliceOp | None, why: str) -> FlowTimeoutError:
        what = op.describe() if op is not None else "the collective"
        return FlowTimeoutError(
            f"RCollective on rank {self.rank}: {what} {why} (pattern {self._pattern.name or 'unnamed'}, "
            f"call {self.calls}); the peer may have died or stalled, or ranks run different patterns or sizes",
            self.rank, op)

    def tag_of(self, op: SliceOp) -> int:
        """The p2p tag of a slice op: ``TAG_BASE + flow * parts + part`` (unique per peer pair,
        flow and part; NCCL ignores tags)."""
        return TAG_BASE + op.tag

    def _find_cpu_p2p(self) -> tuple:
        """The group's CPU backend's ``send``/``recv`` (what ``ProcessGroup.send`` dispatches a
        CPU tensor to, minus the dispatcher: ~5 µs of CPU less per post on Gloo), or the
        group's own where it has no separate CPU backend."""
        try:
            be = self._pg._get_backend(torch.device("cpu"))
            self._cpu_p2p = (be.send, be.recv)
        except (RuntimeError, AttributeError, ValueError):
            self._cpu_p2p = (self._pg.send, self._pg.recv)
        return self._cpu_p2p

    def _post(self, op: SliceOp, buf: torch.Tensor):
        """Post ``op`` as ``isend``/``irecv`` (the process group's CPU backend's own call for CPU
        tensors, see :meth:`_find_cpu_p2p`; the group's for CUDA ones: what ``dist.isend`` ends
        in, without its per-call argument checks).

        Raises:
            FlowTimeoutError: the transport refused the post (Gloo's "Connection closed by
                peer" when the peer died), naming the step, peer and chunks.
        """
        try:
            if buf.is_cuda:
                send, recv = self._pg.send, self._pg.recv
            else:
                send, recv = self._cpu_p2p or self._find_cpu_p2p()
            if op.kind == SEND:
                return send([buf], op.peer, TAG_BASE + op.tag)
            return recv([buf], op.peer, TAG_BASE + op.tag)
        except RuntimeError as e:
            first = (str(e).splitlines() or [type(e).__name__])[0][:300]
            raise self._error(op, f"could not be posted: the process group failed ({first}); "
                                  "a peer died or closed its connection") from e

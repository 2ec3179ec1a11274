"""Real ranks behind the executor protocol ``run_epoch(pattern) -> EpochTrace`` (:class:`reactccl.contract.Executor`).

``RealExecutor(pattern, numel)`` lets the tools written for the simulator
(``reactccl.tuner.run_react``, ``run_baseline``: :func:`reactccl.contract.drive`) drive real
processes in lock step: every rank calls ``run_epoch`` with the same pattern, the epoch runs
through :class:`RCollective`, and every rank gets the same assembled trace
(one all-gather of the records per epoch, as plain JSON data: :mod:`.wire`). Each rank then runs its own copy of
the controller on identical traces; a seeded controller decides identically
on all of them, and RCollective's agreement check (which includes the
pattern digest) stops the job with an error if they ever diverge.

For training jobs prefer :class:`reactccl.torch.ReactAllReduce` (RTuner: one
leader, no per-epoch gathering on the data path).
"""

from __future__ import annotations

import torch

from ..pattern import Collective, CollectivePattern
from ..trace import EpochTrace
from .faults import BrokenGroup
from .rcollective import RCollective, pattern_digest
from .records import assemble_trace, record_from_wire, record_to_wire
from .wire import all_gather_json

__all__ = ["RealExecutor"]


class RealExecutor:
    """Run one collective of ``numel`` elements per epoch on real ranks.

    Args:
        pattern: the initial pattern (its ranks = the group's ranks).
        numel: message elements; ``dtype`` their type (bytes = numel x element size).
        group, timeout: as for :class:`RCollective`.
        check_result: for AllReduce, fill rank r's message with r+1 and check every
            element of the result is N(N+1)/2 (exact in float32 for N < 2^12).

    Raises:
        RuntimeError: ``check_result`` found a wrong AllReduce result (naming rank and epoch).
    """

    def __init__(self, pattern: CollectivePattern, numel: int, dtype: torch.dtype = torch.float32, group=None,
                 timeout: float = 60.0, check_result: bool = True) -> None:
        self.rc = RCollective(pattern, group, timeout=timeout)
        self.buf = torch.zeros(int(numel), dtype=dtype)
        self.check_result = check_result and pattern.collective is Collective.ALLREDUCE
        self.epoch = 0
        self._group = BrokenGroup("RealExecutor", self.rc.rank)

    def run_epoch(self, pattern: CollectivePattern) -> EpochTrace:
        """Run one epoch of ``pattern`` (collective: every rank, same pattern); returns its trace."""
        if pattern is not self.rc.pattern and pattern_digest(pattern) != self.rc.digest:
            self.rc.set_pattern(pattern)
        n = self.rc.world
        self.buf.fill_(self.rc.rank + 1)
        self._group.run(lambda: self.rc(self.buf, epoch=self.epoch), self.epoch)  # transport error -> named
        if self.check_result and self.buf.numel():
            want = n * (n + 1) // 2
            bad = torch.nonzero(self.buf != want)
            if bad.numel():
                i = int(bad[0])
                raise RuntimeError(f"RealExecutor on rank {self.rc.rank}, epoch {self.epoch}: element {i} is "
                                   f"{float(self.buf[i])}, expected {want}")
        self.epoch += 1
        return self._gather_trace()

    def _gather_trace(self) -> EpochTrace:
        """Every rank's record of the last call, all-gathered as plain data, joined into the trace."""
        rc = self.rc
        if rc.clock_offset is None:
            rc.sync_clock()
            rc.last_record.clock_offset = rc.clock_offset
        recs = [record_from_wire(d) for d in all_gather_json(record_to_wire(rc.last_record), group=rc.group)]
        return assemble_trace(rc.pattern, recs)

    def close(self) -> None:
        """Stop the collective's waiter threads."""
        self.rc.close()

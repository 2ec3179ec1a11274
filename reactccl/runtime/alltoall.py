"""RAllToAll: run an AllToAll pattern as ``dist.all_to_all_single(output, input)`` (equal splits).

An AllToAll pattern names every block by its (source, destination) (:class:`reactccl.pattern.Collective`),
so a rank that relays blocks (Bruck) needs a place for blocks that are neither its input nor its
output. Each rank therefore runs the pattern in place on a flat N x N *matrix buffer* of
``N * m`` elements for an input of ``m`` (:func:`reactccl.runtime.layout.chunk_bounds`: block
``s*N + d`` sits at ``s*m + d*m/N``): its input is copied into row r, :class:`RCollective` runs
the flows, and column r (block ``s*N + r`` for every s, its own block ``r*N + r`` included, which
no flow moves) is copied out into ``output``. A rank only ever writes row r, column r and the
blocks it relays, so on Linux the rest of the buffer is address space without memory behind it
(pages are only backed when touched); every rank must still reserve ``N * m`` elements of address
space. Input and output may be the same tensor (in place).

Source: PyTorch ``torch.distributed.all_to_all_single`` (the reference this is checked against,
bit-exact, in tests/test_runtime_alltoall.py); nccl-tests ``src/alltoall.cu``.
"""

from __future__ import annotations

import torch

from ..pattern import Collective, CollectivePattern
from .rcollective import RCollective

__all__ = ["RAllToAll"]


class RAllToAll:
    """An AllToAll pattern bound to a process group, called like ``dist.all_to_all_single``.

    Args:
        pattern: a verified AllToAll pattern with one rank per group member.
        group: the process group (default: the default group).
        **options: passed to :class:`RCollective` (``timeout``, ``check``, ``mode``, ...).

    Raises:
        ValueError: the pattern is not an AllToAll, or its rank count differs from the group's.
        VerificationError: the pattern does not compute an AllToAll.

    Attributes:
        collective: the :class:`RCollective` that runs the flows (its ``gather_trace``,
            ``set_pattern`` and ``last_record`` work as for any collective).
    """

    def __init__(self, pattern: CollectivePattern, group=None, **options) -> None:
        if pattern.collective is not Collective.ALLTOALL:
            raise ValueError(f"RAllToAll: pattern computes {pattern.collective.value}, not alltoall")
        self.collective = RCollective(pattern, group, **options)
        self._work: dict[tuple, torch.Tensor] = {}

    @property
    def pattern(self) -> CollectivePattern:
        """The pattern the next call runs."""
        return self.collective.pattern

    def __call__(self, output: torch.Tensor, input: torch.Tensor, epoch: int | None = None) -> torch.Tensor:
        """``output`` block s = rank s's ``input`` block r (this rank r), as
        ``dist.all_to_all_single(output, input)``; blocks are ``input.numel() / N`` elements.

        Returns:
            ``output``.

        Raises:
            ValueError: ``input`` and ``output`` differ in element count, dtype or device, or
                the count is not a multiple of the group size.
            MismatchError, FlowTimeoutError: as :meth:`RCollective.__call__`.
        """
        rc = self.collective
        n, N, r = input.numel(), rc.world, rc.rank
        if output.numel() != n or output.dtype != input.dtype or output.device != input.device:
            raise ValueError(f"RAllToAll: output ({output.numel()} x {output.dtype} on {output.device}) must match "
                             f"input ({n} x {input.dtype} on {input.device})")
        if n % N:
            raise ValueError(f"RAllToAll: {n} elements do not split into {N} equal blocks (one per rank)")
        m = n // N
        key = (n, input.dtype, input.device)
        work = self._work.get(key)
        if work is None:
            self._work = {key: torch.empty(N * n, dtype=input.dtype, device=input.device)}
            work = self._work[key]
        grid = work.view(N, N, m)
        grid[r].copy_(input.reshape(N, m))           # row r: this rank's blocks for every d
        rc(work, epoch=epoch)
        out = output.view(N, m) if output.is_contiguous() else torch.empty(N, m, dtype=output.dtype,
                                                                           device=output.device)
        out.copy_(grid[:, r])                         # column r: block (s, r) from every s
        if out.data_ptr() != output.data_ptr():
            output.copy_(out.view_as(output))
        return output

    def set_pattern(self, pattern: CollectivePattern) -> None:
        """Run ``pattern`` (an AllToAll) from the next call on; see :meth:`RCollective.set_pattern`."""
        self.collective.set_pattern(pattern)

    def gather_trace(self, group=None):
        """The last call's :class:`~reactccl.trace.EpochTrace` (collective over the group); its
        ``message_bytes`` is nccl-tests' size, one rank's input."""
        return self.collective.gather_trace(group)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the collective's threads (:meth:`RCollective.close`) and drop the buffer."""
        self._work.clear()
        self.collective.close(timeout)

"""Incremental construction of patterns for generators."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .ir import CollectivePattern
from .types import Collective, Op

__all__ = ["PatternBuilder"]


class PatternBuilder:
    """Collects chunks and flows, then builds a :class:`CollectivePattern`.

    Example (a 2-rank AllReduce in one step each way)::

        b = PatternBuilder("allreduce", 2, name="pair")
        c = b.chunk(1.0, graph=0)
        b.flow(0, 0, 1, [c]); b.flow(0, 1, 0, [c])
        pattern = b.build()
    """

    def __init__(self, collective: Collective | str, num_ranks: int, root: int | None = None,
                 name: str = "") -> None:
        self.collective, self.num_ranks, self.root, self.name = collective, num_ranks, root, name
        self._sizes: list[float] = []
        self._graphs: list[int] = []
        self._step: list[int] = []
        self._src: list[int] = []
        self._dst: list[int] = []
        self._op: list[int] = []
        self._ptr: list[int] = [0]
        self._idx: list[int] = []

    def chunk(self, size: float, graph: int) -> int:
        """Add a chunk of ``size`` (fraction of the message) in ``graph``; returns its id."""
        self._sizes.append(float(size))
        self._graphs.append(int(graph))
        return len(self._sizes) - 1

    def chunks(self, sizes: Sequence[float], graphs: Sequence[int]) -> list[int]:
        """Add several chunks; returns their ids."""
        return [self.chunk(s, g) for s, g in zip(sizes, graphs)]

    def flow(self, step: int, src: int, dst: int, chunks: Iterable[int], op: Op | str = Op.REDUCE) -> None:
        """Add a flow carrying ``chunks`` from ``src`` to ``dst`` at ``step``."""
        self._step.append(int(step))
        self._src.append(int(src))
        self._dst.append(int(dst))
        self._op.append(Op(op).code)
        self._idx.extend(int(c) for c in chunks)
        self._ptr.append(len(self._idx))

    def build(self) -> CollectivePattern:
        """The pattern (structurally checked; call ``verify`` for semantics)."""
        return CollectivePattern.from_arrays(
            self.collective, self.num_ranks, self._sizes, self._graphs,
            np.asarray(self._step, dtype=np.int64), np.asarray(self._src, dtype=np.int64),
            np.asarray(self._dst, dtype=np.int64), np.asarray(self._op, dtype=np.int8),
            np.asarray(self._ptr, dtype=np.int64), np.asarray(self._idx, dtype=np.int64),
            root=self.root, name=self.name)

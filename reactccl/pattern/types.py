"""Small value types of the pattern IR: collectives, flow operations, chunks, flows.

An enum's value is its wire form in the ``reactccl.pattern/1`` JSON schema, so
serialisation is ``member.value`` and parsing is ``Enum(value)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..errors import ReactcclError

__all__ = ["Collective", "Op", "Chunk", "Flow", "PatternError", "excerpt", "EXCERPT_CHARS"]

#: Characters of a value from a file that an error message echoes (see :func:`excerpt`).
EXCERPT_CHARS = 60


def excerpt(value: object, limit: int = EXCERPT_CHARS, quote: bool = True) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters plus its length, so
    that a hostile file's megabyte attribute stays a short line:
    ``excerpt("x" * 10**6)`` -> ``'xxx...x'... (1000002 chars)`` (60 characters, then the length).
    A huge integer is described by its digit count instead of being converted (Python refuses
    ``repr`` of an int over 4300 digits); a list or dict by its length. ``quote=False``: a
    string as it is, without repr's quotes."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 190:
        return f"an integer of {len(str(abs(value))) if value.bit_length() < 14000 else 'over 4000'} digits"
    if isinstance(value, (list, dict)):
        return f"a {type(value).__name__} of {len(value)}"
    r = value if isinstance(value, str) and not quote else repr(value)
    return r if len(r) <= limit else f"{r[:limit - 3]}... ({len(r)} chars)"


class PatternError(ReactcclError, ValueError):
    """A pattern (or its JSON) is malformed or does not compute its collective.

    The message always names what is wrong: the field and index for a malformed
    pattern, or the rank, chunk and step for a failed verification.
    """


class Collective(str, Enum):
    """The collective a pattern computes (nccl-tests naming, lower case).

    ``BROADCAST`` and ``REDUCE`` need a root rank; the others must not have one.
    For ``ALLGATHER`` and ``REDUCESCATTER`` the message is the N blocks together
    (nccl-tests' size): block ``r`` of the message is rank ``r``'s input
    (AllGather) or output (ReduceScatter).

    ``ALLTOALL`` (nccl-tests' size S is one rank's buffer: N blocks of S/N, block j for
    rank j): the pattern's message is the N x N matrix of all ranks' blocks together,
    N*S bytes, cut into N*N blocks of 1/N^2 of it in row-major order, so block
    ``b = s*N + d`` (``[b/N^2, (b+1)/N^2)`` of the message) is the data rank ``s`` sends
    to rank ``d``: rank s's input block d and rank d's output block s (MPI_Alltoall,
    ``dist.all_to_all_single``). Row s (``[s/N, (s+1)/N)``) is rank s's input, column d
    its output. A chunk of size f therefore carries ``f * N * S`` bytes
    (:meth:`message_scale`).
    """

    ALLREDUCE = "allreduce"
    ALLGATHER = "allgather"
    REDUCESCATTER = "reducescatter"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALLTOALL = "alltoall"

    @property
    def needs_root(self) -> bool:
        """True for Broadcast and Reduce."""
        return self in (Collective.BROADCAST, Collective.REDUCE)

    @property
    def is_blocked(self) -> bool:
        """True when the message is split in one block per rank (AllGather, ReduceScatter)."""
        return self in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLTOALL)

    @property
    def reduces(self) -> bool:
        """True when the collective adds contributions (AllReduce, ReduceScatter, Reduce)."""
        return self in (Collective.ALLREDUCE, Collective.REDUCESCATTER, Collective.REDUCE)

    def num_blocks(self, num_ranks: int) -> int:
        """Blocks the message is cut in: N (AllGather, ReduceScatter), N*N (AllToAll), else 1.
        Every chunk of a blocked collective lies inside one block."""
        n = int(num_ranks)
        return n * n if self is Collective.ALLTOALL else n if self.is_blocked else 1

    def message_scale(self, num_ranks: int) -> int:
        """Bytes of the pattern's message per byte of nccl-tests' size S: N for AllToAll (the
        message is all N ranks' buffers), else 1. Flow bytes = chunk fractions x S x this."""
        return int(num_ranks) if self is Collective.ALLTOALL else 1


class Op(str, Enum):
    """What the destination of a flow does with the chunks it receives.

    ``REDUCE``: the destination adds the sender's value to its own.
    ``COPY``: the destination replaces its value with the sender's.
    """

    REDUCE = "reduce"
    COPY = "copy"

    @property
    def code(self) -> int:
        """Integer code used in the pattern's ``op`` array (reduce 0, copy 1)."""
        return 0 if self is Op.REDUCE else 1

    @staticmethod
    def from_code(code: int) -> "Op":
        """Inverse of :attr:`code`."""
        return Op.REDUCE if int(code) == 0 else Op.COPY


@dataclass(frozen=True)
class Chunk:
    """A piece of the message.

    Attributes:
        id: index of the chunk, 0..C-1. Chunks lie in the message in id order,
            so chunk ``c`` covers ``[sum(size[:c]), sum(size[:c+1]))``.
        size: fraction of the message (0 < size <= 1); all sizes sum to 1.
        graph: chunk-graph id; every flow carries chunks of one graph only.
    """

    id: int
    size: float
    graph: int


@dataclass(frozen=True)
class Flow:
    """One transfer in the time-expanded network (TEN).

    Attributes:
        step: logical time step (>= 0); the flow reads ``src``'s state at the
            end of step ``step - 1``.
        src, dst: ranks (distinct).
        chunks: chunk ids carried (non-empty, no repeats, one chunk graph).
        op: ``Op.REDUCE`` or ``Op.COPY``.
    """

    step: int
    src: int
    dst: int
    chunks: tuple[int, ...]
    op: Op = Op.REDUCE

    def __str__(self) -> str:
        ch = ",".join(str(c) for c in self.chunks)
        sym = "+=" if self.op is Op.REDUCE else "<-"
        return f"t{self.step}: {self.src}->{self.dst} [{ch}] {sym}"

"""Small value types of the pattern IR: collectives, flow operations, chunks, flows.

An enum's value is its wire form in the ``reactccl.pattern/1`` JSON schema, so
serialisation is ``member.value`` and parsing is ``Enum(value)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

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


class PatternError(ValueError):
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
    """

    ALLREDUCE = "allreduce"
    ALLGATHER = "allgather"
    REDUCESCATTER = "reducescatter"
    BROADCAST = "broadcast"
    REDUCE = "reduce"

    @property
    def needs_root(self) -> bool:
        """True for Broadcast and Reduce."""
        return self in (Collective.BROADCAST, Collective.REDUCE)

    @property
    def is_blocked(self) -> bool:
        """True when the message is split in one block per rank (AllGather, ReduceScatter)."""
        return self in (Collective.ALLGATHER, Collective.REDUCESCATTER)


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

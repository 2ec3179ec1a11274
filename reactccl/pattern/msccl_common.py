"""What the MSCCL-XML exporter and importer share: names, buffers, the chunk grid.

The format is the one the MSCCL executor (microsoft/msccl, ``src/misc/msccl``) reads and
msccl-tools (``msccl/language/ir.py``) writes::

    <algo name=.. proto="Simple" nchannels=.. nchunksperloop=K ngpus=N coll=.. inplace="1" ..>
      <gpu id=r i_chunks=.. o_chunks=.. s_chunks=..>
        <tb id=b send=PEER|-1 recv=PEER|-1 chan=CH>
          <step s=i type=T srcbuf=i|o|s srcoff=.. dstbuf=.. dstoff=.. cnt=.. depid=B|-1 deps=S|-1 hasdep=0|1/>

A threadblock (``tb``) runs its steps in order; it owns the connection to its send peer and
the one from its receive peer on its channel, and the k-th send on a connection meets the k-th
receive on the other side. ``depid``/``deps`` make a step wait for step ``deps`` of threadblock
``depid`` on the same GPU (extra waits go on ``nop`` steps before it); ``hasdep`` marks steps
something waits for. Buffers are cut into ``nchunksperloop`` equal chunks (for AllGather's input
and ReduceScatter's output, ``K / N``). Step types, as the executor runs them (offsets are local):

======  =====================================================================
s       send ``src``
r       receive into ``dst``
rcs     receive into ``dst`` and send it on
rrc     ``dst = src + received``
rrs     send ``src + received`` on (nothing stored)
rrcs    ``dst = src + received``, and send it on
cpy     ``dst = src`` (local)
re      ``dst = dst + src`` (local)
nop     nothing (carries a dependency)
======  =====================================================================
"""

from __future__ import annotations

from fractions import Fraction
from math import lcm

import numpy as np

from .types import Collective, PatternError
from .verify import VerificationError

__all__ = ["COLL_TO_MSCCL", "MSCCL_TO_COLL", "STEP_TYPES", "SENDS", "RECVS", "REDUCES", "MscclError",
           "MscclVerificationError", "chunk_grid"]

COLL_TO_MSCCL = {Collective.ALLREDUCE: "allreduce", Collective.ALLGATHER: "allgather",
                 Collective.REDUCESCATTER: "reduce_scatter", Collective.BROADCAST: "broadcast",
                 Collective.REDUCE: "reduce"}
MSCCL_TO_COLL = {v: k for k, v in COLL_TO_MSCCL.items()}
STEP_TYPES = ("s", "r", "rcs", "rrc", "rrs", "rrcs", "cpy", "re", "nop")
SENDS = frozenset({"s", "rcs", "rrs", "rrcs"})
RECVS = frozenset({"r", "rcs", "rrc", "rrs", "rrcs"})
REDUCES = frozenset({"rrc", "rrs", "rrcs"})

#: Largest nchunksperloop the exporter writes (chunk sizes finer than 1/this are refused).
MAX_CHUNKS_PER_LOOP = 1 << 16


class MscclError(PatternError):
    """An MSCCL-XML document is malformed, deadlocks, races, or cannot be expressed as a pattern
    (the message names the GPU, threadblock and step)."""


class MscclVerificationError(MscclError, VerificationError):
    """A well-formed MSCCL program that does not compute its collective: unmatched sends and
    receives, a deadlock, a race, a read of a cell that holds no data, a reduction of the wrong
    chunk, or final buffers without the collective. Like a JSON pattern failing
    :func:`reactccl.pattern.verify`, ``reactccl pattern verify|import`` report it as ``FAIL``
    (exit 1); any other :class:`MscclError` means "not a pattern" (exit 2)."""


def chunk_grid(chunk_size: np.ndarray, num_ranks: int, blocked: bool) -> tuple[int, np.ndarray, np.ndarray]:
    """Integer offsets for chunks given as fractions of the message.

    Returns:
        ``(K, offset, count)``: K = nchunksperloop, the LCM of the sizes' denominators (times
        N's share for a blocked collective so blocks are whole); chunk c covers grid cells
        ``offset[c] .. offset[c] + count[c] - 1``, shape ``(C,)`` each.

    Raises:
        MscclError: a size that is no fraction with a denominator up to
            :data:`MAX_CHUNKS_PER_LOOP`, or a grid finer than that.
    """
    fr = []
    for c, s in enumerate(chunk_size.tolist()):
        f = Fraction(s).limit_denominator(MAX_CHUNKS_PER_LOOP)
        if abs(float(f) - s) > 1e-9:
            raise MscclError(f"chunks[{c}].size {s!r} is not a fraction with denominator <= "
                             f"{MAX_CHUNKS_PER_LOOP}; MSCCL chunks are whole cells of the buffer")
        fr.append(f)
    k = 1
    for f in fr:
        k = lcm(k, f.denominator)
    if blocked:
        k = lcm(k, num_ranks)
    if k > MAX_CHUNKS_PER_LOOP:
        raise MscclError(f"nchunksperloop would be {k} (LCM of the chunk sizes' denominators), above "
                         f"{MAX_CHUNKS_PER_LOOP}")
    count = np.array([int(f * k) for f in fr], dtype=np.int64)
    offset = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64)
    return k, offset, count

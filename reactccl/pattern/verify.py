"""Exact semantic verification of a pattern by counting contributions.

Semantics (the schema's; the runtime executes the same):

* A value is either *undefined* or a multiset of contributions (rank r's input
  of that chunk). Before its first write, rank r holds at chunk c its own input
  where the collective gives it one, and an undefined value elsewhere:

  ========================  ===============================================
  allreduce, reduce,        every rank holds its own input at every chunk
  reducescatter
  allgather, alltoall       rank r holds its input at the chunks of block r
                            (alltoall: of row r, the N blocks r*N..r*N+N-1)
                            only (``chunk_owner``); undefined elsewhere
  broadcast                 the root holds its input at every chunk; every
                            other rank is undefined everywhere
  ========================  ===============================================

* A flow reads its source's value at the end of step t-1. Sending an undefined
  value is an error. ``copy`` replaces the destination's value; ``reduce`` adds
  to it and is an error when the destination's value is undefined (the runtime
  adds into whatever the caller's buffer holds there, i.e. garbage). Several
  reduces into one (rank, chunk) in one step all add; a copy together with any
  other write there is an error.
* At the end every defined output position must hold each required
  contribution exactly once and nothing else: all ranks' at every (rank, chunk)
  for allreduce, at the owner's block for reducescatter, at the root for reduce;
  the owner's (allgather) or root's (broadcast) data at every (rank, chunk); for
  alltoall rank s's data and nothing else at rank d's chunks of block s*N + d
  (``chunk_dest``: every (source, destination) block checked at its destination only).

Each (rank, chunk) keeps, per contributor, a count saturated at 2 (exact for
this decision: a count never shrinks except by a copy that replaces it), in two
bit-planes ``ge1`` (count >= 1) and ``ge2`` (count >= 2) packed in uint64
words (one ``(2, W)`` row per position, so a flow's read is one gather); no
``ge1`` bit is *undefined*. So a pattern that adds a contribution
twice fails like one that misses it, which REACT A.3's bit vectors cannot see.

Memory: see :func:`verify_bytes` (about ``2 * N * C * ceil(N/64) * 8`` bytes of
state plus per-step work space; a 1024-rank ring: ~270 MB). Time: linear in the
(flow, chunk) pairs, plus a small constant per step.
Source: REACT §5.3.1 and A.3 (the check, made exact and strict here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import SIZE_TOL, CollectivePattern
from .types import Collective, PatternError
from .verify_steps import StepError, apply_step

__all__ = ["verify", "verify_bytes", "VerificationError", "VerifyResult", "chunk_owner", "chunk_dest"]

DEFAULT_MAX_BYTES = 4 << 30


class VerificationError(PatternError):
    """A pattern does not compute its collective.

    Attributes:
        rank, chunk, step: where the problem was found (step may be None when
            the (rank, chunk) was never written).
        flow: the flow to blame (a bad send, a reduce into an undefined value,
            a conflicting write), or None for a wrong final state.
        reason: short text of what is wrong.
    """

    def __init__(self, message: str, rank: int | None = None, chunk: int | None = None,
                 step: int | None = None, reason: str = "", flow: int | None = None) -> None:
        super().__init__(message)
        self.rank, self.chunk, self.step, self.reason, self.flow = rank, chunk, step, reason, flow


@dataclass(frozen=True)
class VerifyResult:
    """Summary of a successful verification."""

    collective: str
    num_ranks: int
    num_chunks: int
    num_flows: int
    num_steps: int


def chunk_owner(pattern: CollectivePattern) -> np.ndarray:
    """The rank whose block holds each chunk (AllGather input / ReduceScatter
    output), shape ``(C,)``; chunks lie in the message in id order."""
    n = pattern.num_ranks
    if pattern.collective is Collective.ALLTOALL:     # block s*N + d: row s
        return pattern.chunk_block // n
    starts = (np.cumsum(pattern.chunk_size) - pattern.chunk_size) * n
    return np.minimum(np.floor(starts + SIZE_TOL).astype(np.int64), n - 1)


def chunk_dest(pattern: CollectivePattern) -> np.ndarray:
    """The rank whose output each chunk belongs to, shape ``(C,)``: block ``s*N + d``'s ``d``
    for AllToAll, the owner (:func:`chunk_owner`) for the other collectives."""
    if pattern.collective is Collective.ALLTOALL:
        return pattern.chunk_block % pattern.num_ranks
    return chunk_owner(pattern)


def _final_keys(p, owner: np.ndarray) -> np.ndarray | None:
    """``rank * C + chunk`` of the output positions the final check reads; None for all of them."""
    C = p.num_chunks
    if p.collective is Collective.REDUCESCATTER:
        return owner * C + np.arange(C)
    if p.collective is Collective.ALLTOALL:
        return chunk_dest(p) * C + np.arange(C)
    if p.collective is Collective.REDUCE:
        return p.root * C + np.arange(C)
    return None


# Work-space constants of verify_bytes, measured with tracemalloc (tests/test_verify_limits.py):
# per (flow, chunk) pair of the widest step, rows of W words held at once by apply_step
STEP_ROWS_PER_PAIR = 9
FINAL_BLOCK_BYTES = 32 << 20    # the final check runs in blocks of about this size


def verify_bytes(num_ranks: int, num_chunks: int, num_pairs: int = 0, widest_step: int = 0,
                 collective: Collective | str | None = None) -> int:
    """Bytes :func:`verify` allocates at its peak (an upper estimate; tests/test_verify_limits.py
    compares it with tracemalloc's peak).

    Args:
        num_ranks, num_chunks: N and C.
        num_pairs: (flow, chunk) pairs of the whole pattern.
        widest_step: pairs in the step with the most.
        collective: when given, the final check counts only its output positions
            (C of them for reducescatter, reduce and alltoall, else N*C).

    Returns:
        ``2*N*C*W*8`` (the two bit-planes, W = ceil(N/64) words a row) ``+ 16*N*C``
        (last write and first double count of each position) ``+ 48*pairs`` (the
        step order) ``+ max(step, final)``: one step's work space, ``P * (9*W*8 + 96)``
        for its P = ``widest_step`` pairs, or the final check's, ``B * (3*W*8 + 64)``
        for blocks of B = min(outputs, 32 MiB / (W*8)) rows; ``+ 64*C + 1 MiB`` (the
        chunk owners and small arrays).
    """
    N, C = int(num_ranks), int(num_chunks)
    W = (N + 63) // 64
    state = 2 * N * C * W * 8 + 16 * N * C
    step = int(widest_step) * (STEP_ROWS_PER_PAIR * W * 8 + 96)
    outputs = C if collective is not None and Collective(collective) in (Collective.REDUCESCATTER, Collective.REDUCE,
                                                                          Collective.ALLTOALL) else N * C
    rows = min(outputs, max(1, FINAL_BLOCK_BYTES // (W * 8)))
    final = rows * (3 * W * 8 + 64)
    return state + 48 * int(num_pairs) + max(step, final) + 64 * C + (1 << 20)


#: Calls of :func:`verify` (with ``compiled=None``) in this process that use the numpy count before
#: it switches to the compiled one (see ``compiled``).
COMPILED_AFTER = 2000
_calls = [0]


def verify(pattern: CollectivePattern, max_bytes: int = DEFAULT_MAX_BYTES,
           chunks: np.ndarray | None = None, compiled: bool | None = None) -> VerifyResult:
    """Prove that ``pattern`` computes its collective, each contribution exactly once.

    Semantics as in this module's docstring: a rank starts with its own input
    where the collective gives it one and an undefined value elsewhere; flows of
    step t read the state at the end of step t-1; sending an undefined value, or
    reducing into one, is an error; several reduces into one (rank, chunk) in one
    step add up, a copy there together with any other write is rejected.

    Args:
        pattern: the pattern to check.
        max_bytes: refuse (PatternError, before allocating) when :func:`verify_bytes`
            estimates more than this (always judged on the whole pattern).
        chunks: check only these chunk ids (shape ``(k,)``): their flow-chunk pairs and final
            (rank, chunk) positions. Chunks never meet (a pair reads and writes one chunk), so
            the whole pattern verifies iff every chunk does; the tuner checks only the chunk
            graph a swap changed in a pattern whose other chunks are known to verify.
        compiled: up to 64 ranks, first ask the compiled count (:mod:`.verify_fast`) and
            return at once when it accepts; otherwise (and with ``compiled=False``, the
            reference) the numpy count below runs and names what is wrong. ``None`` (default):
            tiered as a JIT is: the numpy count for this process's first :data:`COMPILED_AFTER`
            calls, the compiled count after them. Compiling it costs about 3.5 s of CPU once per
            machine (importing numba 0.5 s in each process); the numpy count costs about 0.4 ms
            more per 8-rank pattern, so only a process that verifies thousands of patterns
            (REACT's greedy search verifies 13,000 in ``experiment fig5a``: 15 s against 20 s) gains,
            and ``pattern verify`` or the demo (57 calls) never load numba for it. Either way the
            result is the same.

    Returns:
        A :class:`VerifyResult` on success.

    Raises:
        PatternError: the estimate exceeds ``max_bytes`` (the estimate is named).
        VerificationError: naming flow (where one is to blame), step, rank, chunk
            and the reason: a flow that sends a value its source does not hold, a
            reduce into an undefined value, two conflicting writes in one step, or
            a final state with a missing, extra or doubly counted contribution.
    """
    p = pattern
    N, C = p.num_ranks, p.num_chunks
    W = (N + 63) // 64
    pf = p.pair_flow
    # the estimate with every pair in one step bounds the exact one: sort the steps only if
    # that bound is over the limit, or for the numpy count below
    if verify_bytes(N, C, len(pf), len(pf), p.collective) > max_bytes:
        _, _, widest = _step_runs(p, pf, None)
        need = verify_bytes(N, C, len(pf), widest, p.collective)
        if need > max_bytes:
            raise PatternError(f"verify: exact check of {N} ranks x {C} chunks ({len(pf)} flow-chunk pairs, "
                               f"{widest} in the widest step) needs about {need / 2**30:.2f} GiB "
                               f"(limit {max_bytes / 2**30:.2f} GiB); use structural checks at this scale")
    wanted = None
    if chunks is not None:
        chunks = np.unique(np.asarray(chunks, dtype=np.int64))
        if chunks.size and (chunks[0] < 0 or chunks[-1] >= C):
            raise PatternError(f"verify: chunk ids must be in 0..{C - 1}, got {chunks.tolist()[:8]}")
        wanted = np.zeros(C, dtype=bool)
        wanted[chunks] = True
    owner = chunk_owner(p)
    if compiled is None:
        _calls[0] += 1
        compiled = _calls[0] > COMPILED_AFTER
    if compiled:
        from .verify_fast import accepts  # start-up cost: numba (see ``compiled``)
        if accepts(p, owner, np.ones(C, dtype=bool) if chunks is None else wanted):
            return VerifyResult(p.collective.value, N, C, p.num_flows, p.num_steps)
    order, (starts, ends), _ = _step_runs(p, pf, wanted)
    step_sorted = p.step[pf][order]
    state = np.zeros((N * C, 2, W), dtype=np.uint64)   # both planes of a position in one row
    ge1, ge2 = state[:, 0], state[:, 1]
    coll = p.collective
    if coll in (Collective.ALLGATHER, Collective.ALLTOALL):
        ge1[owner * C + np.arange(C), owner // 64] = np.uint64(1) << (owner % 64).astype(np.uint64)
    elif coll is Collective.BROADCAST:
        ge1[p.root * C:(p.root + 1) * C, p.root // 64] = np.uint64(1) << np.uint64(p.root % 64)
    else:   # every rank's own bit at all its chunks, without (N*C)-long index arrays
        r = np.arange(N)
        state.reshape(N, C, 2, W)[r, :, 0, r // 64] = (np.uint64(1) << (r % 64).astype(np.uint64))[:, None]
    last_write = np.full(N * C, -1, dtype=np.int64)
    first_dup = np.full(N * C, -1, dtype=np.int64)
    origin: list[tuple[int, int, int]] = []   # (step, flow, target key) of the first double count made
    sel_f, sel_c = pf[order], p.chunk_idx[order]
    for a, b in zip(starts.tolist(), ends.tolist()):
        t = int(step_sorted[a])
        try:
            apply_step(p, t, sel_f[a:b], sel_c[a:b], state, last_write, first_dup, origin)
        except StepError as e:
            raise VerificationError(str(e), rank=e.rank, chunk=e.chunk, step=e.step, reason=e.reason,
                                    flow=e.flow) from None
    _check_final(p, owner, ge1, ge2, last_write, first_dup, origin, chunks)
    return VerifyResult(coll.value, N, C, p.num_flows, p.num_steps)


def _step_runs(p, pf: np.ndarray, wanted: np.ndarray | None):
    """The pairs of the wanted chunks (all when None) in step order, the ``(starts, ends)`` of
    each step's run in that order, and the pairs in the widest step."""
    order = np.argsort(p.step[pf], kind="stable") if len(pf) else np.zeros(0, dtype=np.int64)
    if wanted is not None:
        order = order[wanted[p.chunk_idx[order]]]
    step_sorted = p.step[pf][order]
    cut = np.flatnonzero(step_sorted[1:] != step_sorted[:-1]) + 1
    starts = np.concatenate(([0], cut)).astype(np.int64) if len(order) else np.zeros(0, dtype=np.int64)
    ends = np.append(starts[1:], len(order)).astype(np.int64)
    return order, (starts, ends), int((ends - starts).max()) if len(starts) else 0


def _bits(row: np.ndarray, n: int) -> list[int]:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:n]
    return np.flatnonzero(bits).tolist()


# collectives whose output is one rank's data (not a sum of every rank's)
_OWNED = (Collective.ALLGATHER, Collective.BROADCAST, Collective.ALLTOALL)


def _expected_rows(p, owner, keys: np.ndarray, W: int) -> np.ndarray | None:
    """The required ``ge1`` rows at ``keys``: None for "every rank" (reductions), else one bit each."""
    coll = p.collective
    if coll not in _OWNED:
        return None
    C = p.num_chunks
    r = np.full(len(keys), p.root) if coll is Collective.BROADCAST else owner[keys % C]
    out = np.zeros((len(keys), W), dtype=np.uint64)
    out[np.arange(len(keys)), r // 64] = np.uint64(1) << (r % 64).astype(np.uint64)
    return out


def _check_final(p, owner, ge1, ge2, last_write, first_dup, origin, chunks=None) -> None:
    N, C = p.num_ranks, p.num_chunks
    coll = p.collective
    W = ge1.shape[1]
    full = np.full(W, np.uint64(0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    if N % 64:
        full[-1] = (np.uint64(1) << np.uint64(N % 64)) - np.uint64(1)
    keys = _final_keys(p, owner)   # None: every (rank, chunk)
    if chunks is not None:      # only the positions of these chunks
        keys = (np.arange(N)[:, None] * C + chunks[None, :]).reshape(-1) if keys is None \
            else keys[np.bincount(chunks, minlength=C)[keys % C] > 0]
    total = N * C if keys is None else len(keys)
    block = max(1, FINAL_BLOCK_BYTES // (W * 8))
    first_bad, n_bad = None, 0
    for lo in range(0, total, block):
        hi = min(lo + block, total)
        k = np.arange(lo, hi) if keys is None else keys[lo:hi]
        g1, g2 = (ge1[lo:hi], ge2[lo:hi]) if keys is None else (ge1[k], ge2[k])   # views where contiguous
        exp = _expected_rows(p, owner, k, W)
        wrong = ((g1 != full).any(axis=1) if exp is None else (g1 != exp).any(axis=1)) | g2.any(axis=1)
        nb = int(np.count_nonzero(wrong))
        if nb and first_bad is None:
            first_bad = int(k[np.flatnonzero(wrong)[0]])
        n_bad += nb
    if first_bad is None:
        return
    key = first_bad
    rank, chunk = key // C, key % C
    g1, g2 = ge1[key], ge2[key]
    exp = full if coll not in _OWNED else _expected_rows(p, owner, np.array([key]), W)[0]
    dup = _bits(g2, N)
    missing = _bits(exp & ~g1, N)
    extra = _bits(g1 & ~exp, N)
    if dup:
        t = int(first_dup[key]) if first_dup[key] >= 0 else None
        why = f"contribution of rank {dup[0]} counted twice or more"
        where = f"first at step {t}" if t is not None else "carried in by a copy"
        if origin:
            ot, of, okey = origin[0]
            where += (f"; the first double count arose at step {ot}: flow {of} ({p.src[of]}->{p.dst[of]}) "
                      f"reduced chunk {okey % C} into rank {okey // C}, which already held part of it")
    elif missing:
        t = int(last_write[key]) if last_write[key] >= 0 else None
        what = "data" if coll in _OWNED else "contribution"
        why = f"{what} of rank{'s' if len(missing) > 1 else ''} {_short(missing)} missing"
        where = f"last written at step {t}" if t is not None else "never received anything"
    else:
        t = int(last_write[key]) if last_write[key] >= 0 else None
        why = f"holds data of rank{'s' if len(extra) > 1 else ''} {_short(extra)} it should not"
        where = f"last written at step {t}"
    raise VerificationError(
        f"{coll.value} not computed: rank {rank}, chunk {chunk}: {why} ({where}); "
        f"{n_bad} (rank, chunk) pair{'s' if n_bad > 1 else ''} wrong in all",
        rank=rank, chunk=chunk, step=t, reason=why)


def _short(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (f" ... ({len(ranks)} in all)" if len(ranks) > 8 else "")

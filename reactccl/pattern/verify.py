"""Exact semantic verification of a pattern by counting contributions.

Each (rank, chunk) holds, for every contributor rank, how many times that
contributor's data has been added into it. Counts are saturated at 2, which
keeps the decision exact (a collective needs every count to be exactly 0 or
exactly 1, and a count never shrinks except by a copy that replaces it) while
letting the state live in two bit-planes packed into uint64 words:
``ge1`` (count >= 1) and ``ge2`` (count >= 2). Reducing ``b`` into ``a`` is
``ge2 = a.ge2 | b.ge2 | (a.ge1 & b.ge1)``, ``ge1 = a.ge1 | b.ge1``. So a pattern
that adds a contribution twice fails exactly like one that misses it, which the
bit-vector check of REACT A.3 cannot see.

Memory: ``2 * N * C * ceil(N/64) * 8`` bytes (a 1024-rank ring: 268 MB).
Source: REACT §5.3.1 and A.3 (the check, made exact here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir import SIZE_TOL, CollectivePattern
from .types import Collective, PatternError

__all__ = ["verify", "VerificationError", "VerifyResult", "chunk_owner"]

DEFAULT_MAX_BYTES = 4 << 30


class VerificationError(PatternError):
    """A pattern does not compute its collective.

    Attributes:
        rank, chunk, step: where the problem was found (step may be None when
            the (rank, chunk) was never written).
        reason: short text of what is wrong.
    """

    def __init__(self, message: str, rank: int | None = None, chunk: int | None = None,
                 step: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.rank, self.chunk, self.step, self.reason = rank, chunk, step, reason


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
    starts = (np.cumsum(pattern.chunk_size) - pattern.chunk_size) * n
    return np.minimum(np.floor(starts + SIZE_TOL).astype(np.int64), n - 1)


def verify(pattern: CollectivePattern, max_bytes: int = DEFAULT_MAX_BYTES) -> VerifyResult:
    """Prove that ``pattern`` computes its collective, each contribution exactly once.

    Flows of step t read their source's state at the end of step t-1; flows
    into one (rank, chunk) in one step are all applied (several reduces add
    up; a copy there together with any other write is ambiguous and rejected).

    Args:
        pattern: the pattern to check.
        max_bytes: refuse (PatternError) rather than allocate more state than this.

    Returns:
        A :class:`VerifyResult` on success.

    Raises:
        VerificationError: naming rank, chunk, step and the reason: a flow that
            sends a chunk its source does not hold yet, two conflicting writes
            in one step, or a final state with a missing, extra or doubly
            counted contribution.
    """
    p = pattern
    N, C = p.num_ranks, p.num_chunks
    W = (N + 63) // 64
    need = 2 * N * C * W * 8
    if need > max_bytes:
        raise PatternError(f"verify: exact check of {N} ranks x {C} chunks needs {need / 2**30:.1f} GiB "
                           f"(limit {max_bytes / 2**30:.1f} GiB); use structural checks at this scale")
    ge1 = np.zeros((N * C, W), dtype=np.uint64)
    ge2 = np.zeros((N * C, W), dtype=np.uint64)
    coll = p.collective
    chunks = np.arange(C)
    owner = chunk_owner(p)
    if coll is Collective.ALLGATHER:
        init_rank = owner
    elif coll is Collective.BROADCAST:
        init_rank = None
        ge1[p.root * C + chunks, p.root // 64] |= np.uint64(1) << np.uint64(p.root % 64)
    else:
        init_rank = None
        r = np.repeat(np.arange(N), C)
        ge1[np.arange(N * C), r // 64] = np.uint64(1) << (r % 64).astype(np.uint64)
    if init_rank is not None:
        ge1[init_rank * C + chunks, init_rank // 64] |= np.uint64(1) << (init_rank % 64).astype(np.uint64)

    last_write = np.full(N * C, -1, dtype=np.int64)
    first_dup = np.full(N * C, -1, dtype=np.int64)
    origin: list[tuple[int, int, int]] = []   # (step, flow, target key) of the first double count made
    pf = p.pair_flow
    if len(pf):
        _run_steps(p, pf, ge1, ge2, last_write, first_dup, origin)
    _check_final(p, owner, ge1, ge2, last_write, first_dup, origin)
    return VerifyResult(coll.value, N, C, p.num_flows, p.num_steps)


def _run_steps(p, pf, ge1, ge2, last_write, first_dup, origin) -> None:
    C = p.num_chunks
    ch = p.chunk_idx
    step = p.step[pf]
    order = np.argsort(step, kind="stable")
    step_sorted = step[order]
    bounds = np.flatnonzero(np.diff(step_sorted)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(order)]))
    for a, b in zip(starts, ends):
        sel = order[a:b]
        t = int(step_sorted[a])
        f = pf[sel]
        src_key = p.src[f] * C + ch[sel]
        tgt = p.dst[f] * C + ch[sel]
        is_copy = p.op[f] == 1
        s1 = ge1[src_key]
        s2 = ge2[src_key]
        sfirst = first_dup[src_key]
        empty = ~s1.any(axis=1)
        if empty.any():
            i = int(np.flatnonzero(empty)[0])
            fi = int(f[i])
            raise VerificationError(
                f"step {t}: flow {fi} ({p.src[fi]}->{p.dst[fi]}) sends chunk {ch[sel[i]]} but rank {p.src[fi]} "
                f"does not hold it yet", rank=int(p.src[fi]), chunk=int(ch[sel[i]]), step=t,
                reason="source does not hold the chunk")
        o = np.argsort(tgt, kind="stable")
        tgt_s = tgt[o]
        run_start = np.concatenate(([True], tgt_s[1:] != tgt_s[:-1]))
        run_id = np.cumsum(run_start) - 1
        run_first = np.flatnonzero(run_start)
        occ = np.arange(len(o)) - run_first[run_id]
        mult = np.bincount(run_id)
        copy_in_run = np.bincount(run_id, weights=is_copy[o]) > 0
        bad = np.flatnonzero(copy_in_run & (mult > 1))
        if bad.size:
            k = int(tgt_s[run_first[bad[0]]])
            raise VerificationError(
                f"step {t}: rank {k // C}, chunk {k % C} is written by {mult[bad[0]]} flows in one step and one "
                f"of them is a copy (the result would depend on their order)",
                rank=k // C, chunk=k % C, step=t, reason="conflicting writes")
        for k in range(int(occ.max()) + 1):
            pick = o[occ == k]
            tk = tgt[pick]
            cp = is_copy[pick]
            if cp.any():
                ge1[tk[cp]] = s1[pick[cp]]
                ge2[tk[cp]] = s2[pick[cp]]
                first_dup[tk[cp]] = sfirst[pick[cp]]   # a copy carries double counts (and their step) along
            rd = ~cp
            if rd.any():
                tr = tk[rd]
                a1, a2 = ge1[tr], ge2[tr]
                b1, b2 = s1[pick[rd]], s2[pick[rd]]
                n2 = a2 | b2 | (a1 & b1)
                ge1[tr] = a1 | b1
                ge2[tr] = n2
                dup = n2.any(axis=1) & (first_dup[tr] < 0)
                inherited = sfirst[pick[rd]]
                first_dup[tr[dup]] = np.where(inherited[dup] >= 0, inherited[dup], t)
                if not origin:
                    made = np.flatnonzero((a1 & b1).any(axis=1))
                    if made.size:
                        i = int(made[0])
                        origin.append((t, int(f[pick[rd][i]]), int(tr[i])))

            last_write[tk] = t


def _bits(row: np.ndarray, n: int) -> list[int]:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:n]
    return np.flatnonzero(bits).tolist()


def _check_final(p, owner, ge1, ge2, last_write, first_dup, origin) -> None:
    N, C = p.num_ranks, p.num_chunks
    coll = p.collective
    W = ge1.shape[1]
    full = np.full(W, np.uint64(0xFFFFFFFFFFFFFFFF), dtype=np.uint64)
    if N % 64:
        full[-1] = (np.uint64(1) << np.uint64(N % 64)) - np.uint64(1)
    if coll is Collective.ALLREDUCE:
        keys = np.arange(N * C)
        expect = np.broadcast_to(full, (len(keys), W))
    elif coll is Collective.REDUCESCATTER:
        keys = owner * C + np.arange(C)
        expect = np.broadcast_to(full, (len(keys), W))
    elif coll is Collective.REDUCE:
        keys = p.root * C + np.arange(C)
        expect = np.broadcast_to(full, (len(keys), W))
    else:
        src_rank = owner if coll is Collective.ALLGATHER else np.full(C, p.root)
        keys = np.arange(N * C)
        expect = np.zeros((N * C, W), dtype=np.uint64)
        r_of = np.tile(src_rank, N)
        expect[keys, r_of // 64] = np.uint64(1) << (r_of % 64).astype(np.uint64)
    g1, g2 = ge1[keys], ge2[keys]
    wrong = (g1 != expect).any(axis=1) | g2.any(axis=1)
    if not wrong.any():
        return
    i = int(np.flatnonzero(wrong)[0])
    key = int(keys[i])
    rank, chunk = key // C, key % C
    dup = _bits(g2[i], N)
    missing = _bits(expect[i] & ~g1[i], N)
    extra = _bits(g1[i] & ~expect[i], N)
    n_bad = int(wrong.sum())
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
        what = "data" if coll in (Collective.ALLGATHER, Collective.BROADCAST) else "contribution"
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

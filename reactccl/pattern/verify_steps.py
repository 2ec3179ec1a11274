"""One step of :func:`reactccl.pattern.verify`: apply a step's flows to the contribution state.

The state is two bit-planes ``ge1``/``ge2`` held as one uint64 array of shape
``(N*C, 2, W)`` (``state[:, 0]`` is ge1), row ``rank * C + chunk``: bit ``r`` of ``ge1`` says rank r's contribution is in the
value at least once, of ``ge2`` at least twice. A row with no ``ge1`` bit is
*undefined* (the rank holds nothing meaningful there yet). See verify.py for the
semantics; this module only carries them out, in time linear in the step's
(flow, chunk) pairs whatever their shape (many flows into one target included).

Source: REACT §5.3.1 and A.3 (the check), made exact and strict in verify.py.
"""

from __future__ import annotations

import numpy as np

from .types import PatternError

__all__ = ["StepError", "apply_step", "group_sum"]

ALL = 0xFFFFFFFFFFFFFFFF
SMALL_STEP = 8     # steps with at most this many (flow, chunk) pairs take the scalar path


class StepError(PatternError):
    """Raised by :func:`apply_step`; verify.py turns it into a VerificationError."""

    def __init__(self, message: str, flow: int, rank: int, chunk: int, step: int, reason: str) -> None:
        super().__init__(message)
        self.flow, self.rank, self.chunk, self.step, self.reason = flow, rank, chunk, step, reason


def group_sum(start: np.ndarray, one: np.ndarray, two: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Saturating (0, 1, >=2) sum of the rows of each group, by pairwise halving.

    Args:
        start: bool, shape ``(P,)``: True where a group begins (rows sorted by group).
        one, two: uint64 bit-planes, shape ``(P, W)`` (modified in place).

    Returns:
        ``(one, two)`` with one row per group, shape ``(G, W)``. Work is O(P * W)
        (each round halves every group), rounds are ceil(log2(largest group)).
    """
    while len(start) > 1 and not start.all():
        n = len(start)
        first = np.flatnonzero(start)
        local = np.arange(n) - np.repeat(first, np.diff(np.append(first, n)))
        head = local % 2 == 0
        pair = np.flatnonzero(head[:-1] & ~start[1:])
        nxt = pair + 1
        two[pair] |= two[nxt] | (one[pair] & one[nxt])
        one[pair] |= one[nxt]
        keep = np.flatnonzero(head)
        start, one, two = start[keep], one[keep], two[keep]
    return one, two


def _bad_send(p, t: int, fi: int, c: int) -> StepError:
    return StepError(f"step {t}: flow {fi} ({p.src[fi]}->{p.dst[fi]}) sends chunk {c} but rank {p.src[fi]} does "
                     f"not hold it yet (its value there is undefined)", fi, int(p.src[fi]), c, t,
                     "source does not hold the chunk")


def _conflict(p, t: int, fi: int, k: int, mult: int) -> StepError:
    C = p.num_chunks
    return StepError(f"step {t}: rank {k // C}, chunk {k % C} is written by {mult} flows in one step and one of "
                     f"them is a copy (the result would depend on their order)", fi, k // C, k % C, t,
                     "conflicting writes")


def _undefined(p, t: int, fi: int, c: int) -> StepError:
    return StepError(f"step {t}: flow {fi} ({p.src[fi]}->{p.dst[fi]}) reduces chunk {c} into rank {p.dst[fi]}, "
                     f"whose value there is undefined (before its first write a rank holds only what the "
                     f"collective gives it; only a copy may write an undefined position)", fi, int(p.dst[fi]), c, t,
                     "reduce into an undefined value")


def apply_step(p, t: int, f: np.ndarray, ch: np.ndarray, state: np.ndarray,
               last_write: np.ndarray, first_dup: np.ndarray, origin: list) -> None:
    """Apply the pairs ``(f[i], ch[i])`` (flow, chunk) of step ``t`` to the state, in place.

    All reads see the state at the end of step ``t - 1``. Checks, in this order
    (the first offending pair in the given order, or the smallest target, is named):
    a source that is undefined; a target written by several flows one of which is
    a copy; a reduce into an undefined target.

    Steps of at most :data:`SMALL_STEP` pairs go through :func:`_apply_small` (the
    same rules on Python integers: no fixed numpy cost per step, which is what a
    pattern of 100k one-flow steps pays); both give the same state and errors.

    Raises:
        StepError: naming flow, step, rank and chunk.
    """
    if len(f) <= SMALL_STEP:
        _apply_small(p, t, f, ch, state[:, 0], state[:, 1], last_write, first_dup, origin)
        return
    C = p.num_chunks
    # only allgather, broadcast and alltoall start with undefined values; the others never hold one
    undefined_possible = p.collective.value in ("allgather", "broadcast", "alltoall")
    tgt = p.dst[f] * C + ch
    o = np.argsort(tgt, kind="stable")      # pairs grouped by target, given order inside a group
    tgt_s = tgt[o]
    src_key = p.src[f[o]] * C + ch[o]
    s = state[src_key]
    s1, s2 = s[:, 0], s[:, 1]
    if undefined_possible:
        empty = ~s1.any(axis=1)
        if empty.any():
            i = int(np.min(o[empty]))
            raise _bad_send(p, t, int(f[i]), int(ch[i]))
    is_copy = p.op[f[o]] == 1
    start = np.empty(len(o), dtype=bool)
    start[0] = True
    np.not_equal(tgt_s[1:], tgt_s[:-1], out=start[1:])
    first = np.flatnonzero(start)
    tu = tgt_s[first]
    if len(tu) < len(o):
        mult = np.diff(np.append(first, len(o)))
        copies = np.add.reduceat(is_copy.astype(np.int64), first)
        bad = np.flatnonzero((copies > 0) & (mult > 1))
        if bad.size:
            g = int(bad[0])
            raise _conflict(p, t, int(f[o[first[g]]]), int(tu[g]), int(mult[g]))
    gcopy = is_copy[first]               # a group with a copy has just that flow
    a = state[tu]
    a1, a2 = a[:, 0], a[:, 1]
    if undefined_possible:
        undef = ~a1.any(axis=1) & ~gcopy
        if undef.any():
            i = int(np.min(o[first[undef]]))   # the first such pair in the given order
            raise _undefined(p, t, int(f[i]), int(ch[i]))
    several = len(tu) < len(o)
    inh = first_dup[src_key]
    if several:
        big = np.iinfo(np.int64).max
        inh = np.minimum.reduceat(np.where(inh >= 0, inh, big), first)
        inh[inh == big] = -1
        ored2 = np.bitwise_or.reduceat(s2, first, axis=0) if not origin else None
        b1, b2 = group_sum(start, s1, s2)
    else:
        b1, b2 = s1, s2                  # one flow per target: its value is the group's sum
    del s1, s2, a
    n_copy = int(np.count_nonzero(gcopy))
    if n_copy < len(tu):                 # reduce groups add what the target holds
        ov = a1 & b1
        if not origin:
            # a double count arises here: the target already held part of what arrives, or
            # two flows of the group bring overlapping parts
            made = ((b2 | ov) & ~(a2 | ored2)).any(axis=1) if several else ov.any(axis=1)
            g = np.flatnonzero(made & ~gcopy)
            if g.size:
                origin.append(_origin(p, t, f, o, first, int(g[0]), tu, a1, state[src_key, 0]))
        if n_copy:
            keep = np.where(gcopy, np.uint64(0), np.uint64(ALL))[:, None]
            b2 |= keep & (a2 | ov)
            b1 |= keep & a1
        else:
            b2 |= a2 | ov
            b1 |= a1
    fd = first_dup[tu]
    has2 = b2.any(axis=1)
    fd = np.where(gcopy, inh, np.where(has2 & (fd < 0), np.where(inh >= 0, inh, t), fd))
    if several:
        s = np.empty((len(tu), 2, state.shape[2]), dtype=np.uint64)
        s[:, 0], s[:, 1] = b1, b2
    state[tu] = s                        # (b1, b2 are views of s where one flow per target)
    first_dup[tu] = fd
    last_write[tu] = t


def _origin(p, t, f, o, first, g, tu, a1, s1) -> tuple[int, int, int]:
    """(step, flow, target key) of the first flow of group ``g`` whose data overlaps what the
    target holds or what earlier flows of the group brought."""
    end = first[g + 1] if g + 1 < len(first) else len(o)
    held = a1[g].copy() if p.op[f[o[first[g]]]] == 0 else np.zeros_like(a1[g])
    for j in range(first[g], end):
        if (held & s1[j]).any():
            return t, int(f[o[j]]), int(tu[g])
        held |= s1[j]
    return t, int(f[o[first[g]]]), int(tu[g])


def _row(a: np.ndarray, k: int) -> int:
    return int.from_bytes(a[k].tobytes(), "little")


def _apply_small(p, t, f_arr, ch_arr, ge1, ge2, last_write, first_dup, origin) -> None:
    """:func:`apply_step` for a few pairs: rows as Python integers (bit r = rank r); pair i
    is flow ``f[i]`` (src ``srcs[i]``, dst ``dsts[i]``, op ``ops[i]``) carrying chunk ``ch[i]``."""
    C, W = p.num_chunks, ge1.shape[1]
    f, ch = f_arr.tolist(), ch_arr.tolist()
    srcs, dsts, ops = p.src[f_arr].tolist(), p.dst[f_arr].tolist(), p.op[f_arr].tolist()
    groups: dict[int, list[int]] = {}
    s1, s2, sf = [], [], []
    for i, c in enumerate(ch):
        sk = srcs[i] * C + c
        r1 = _row(ge1, sk)
        if not r1:
            raise _bad_send(p, t, f[i], c)
        s1.append(r1)
        s2.append(_row(ge2, sk))
        sf.append(int(first_dup[sk]))
        groups.setdefault(dsts[i] * C + c, []).append(i)
    keys = sorted(groups)
    for k in keys:
        g = groups[k]
        if len(g) > 1 and any(ops[i] == 1 for i in g):
            raise _conflict(p, t, f[g[0]], k, len(g))
    state = {}
    for k in keys:
        state[k] = (_row(ge1, k), _row(ge2, k))
    undef = [groups[k][0] for k in keys if not state[k][0] and ops[groups[k][0]] == 0]
    if undef:
        i = min(undef)
        raise _undefined(p, t, f[i], ch[i])
    for k in keys:
        g = groups[k]
        a1, a2 = state[k]
        inh = min((sf[i] for i in g if sf[i] >= 0), default=-1)
        if ops[g[0]] == 1:
            n1, n2, fd = s1[g[0]], s2[g[0]], inh
        else:
            n1, n2, or2 = a1, a2, 0
            for i in g:
                n2 |= s2[i] | (n1 & s1[i])
                n1 |= s1[i]
                or2 |= s2[i]
            fd = int(first_dup[k])
            if n2 and fd < 0:
                fd = inh if inh >= 0 else t
            if not origin and n2 & ~(a2 | or2):
                held = a1
                for i in g:
                    if held & s1[i]:
                        origin.append((t, f[i], k))
                        break
                    held |= s1[i]
        ge1[k] = np.frombuffer(n1.to_bytes(W * 8, "little"), dtype=np.uint64)
        ge2[k] = np.frombuffer(n2.to_bytes(W * 8, "little"), dtype=np.uint64)
        first_dup[k] = fd
        last_write[k] = t

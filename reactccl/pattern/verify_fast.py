"""The compiled accept path of :func:`reactccl.pattern.verify` for patterns of at most 64 ranks.

:func:`accepts` runs the same contribution count as verify.py and verify_steps.py (semantics
in verify.py's docstring: one uint64 word per bit-plane and position, since N <= 64), but only
answers *whether* the pattern verifies. verify() calls it first and returns at once on True; on
False it runs the numpy reference, which finds and names the flow, step, rank and chunk. So a
kernel that rejected a correct pattern would only cost time; one that accepted a wrong pattern
would be a hole, and ``tests/test_verify_fast.py`` compares the two on thousands of mutated
patterns of every collective.

Why: the tuner verifies every candidate whose viable set is stale (REACT §5.3.1); on 8-rank
patterns numpy's per-call overhead made that 400 µs a candidate. Source: ours.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .types import Collective

__all__ = ["accepts", "MAX_RANKS"]

MAX_RANKS = 64
_REDUCTION, _ALLGATHER, _BROADCAST = 0, 1, 2          # initial state
_ALL, _OWNER, _ROOT, _DEST = 0, 1, 2, 3              # final positions checked (_DEST: rank dest[c] only)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)


@njit(cache=True)
def _accepts(N, C, init, final, root, owner, dest, pf, pc, step, src, dst, op, want):
    one = np.uint64(1)
    zero = np.uint64(0)
    for f in range(len(src)):                 # out of range: not ours to judge (the reference names it)
        if not (0 <= src[f] < N and 0 <= dst[f] < N and (op[f] == 0 or op[f] == 1)):
            return False
    for i in range(len(pf)):
        if not (0 <= pc[i] < C and 0 <= pf[i] < len(src)):
            return False
    if not (0 <= root < N):
        return False
    ge1 = np.zeros(N * C, np.uint64)
    ge2 = np.zeros(N * C, np.uint64)
    for c in range(C):
        if init == 1:
            ge1[owner[c] * C + c] = one << np.uint64(owner[c])
        elif init == 2:
            ge1[root * C + c] = one << np.uint64(root)
        else:
            for r in range(N):
                ge1[r * C + c] = one << np.uint64(r)
    # the pairs of the wanted chunks, in step order
    sel = np.empty(len(pf), np.int64)
    n = 0
    for i in range(len(pf)):
        if want[pc[i]]:
            sel[n] = i
            n += 1
    sel = sel[:n]
    pstep = np.empty(n, np.int64)
    for k in range(n):
        pstep[k] = step[pf[sel[k]]]
    sel = sel[np.argsort(pstep, kind="mergesort")]
    s1 = np.empty(n, np.uint64)
    s2 = np.empty(n, np.uint64)
    tk = np.empty(n, np.int64)
    a = 0
    while a < n:
        t = step[pf[sel[a]]]
        b = a
        while b < n and step[pf[sel[b]]] == t:
            b += 1
        for k in range(a, b):                      # every read sees the state before the step
            i = sel[k]
            f, c = pf[i], pc[i]
            sk = src[f] * C + c
            if ge1[sk] == zero:
                return False                       # sends an undefined value
            s1[k], s2[k] = ge1[sk], ge2[sk]
            tk[k] = dst[f] * C + c
        o = a + np.argsort(tk[a:b], kind="mergesort")
        g = 0
        while g < b - a:
            h = g
            k = tk[o[g]]
            copies = 0
            while h < b - a and tk[o[h]] == k:
                copies += op[pf[sel[o[h]]]] == 1
                h += 1
            if copies and h - g > 1:
                return False                       # a copy and another write in one step
            if copies:
                ge1[k], ge2[k] = s1[o[g]], s2[o[g]]
            else:
                n1, n2 = ge1[k], ge2[k]
                if n1 == zero:
                    return False                   # a reduce into an undefined value
                for m in range(g, h):
                    x = o[m]
                    n2 |= s2[x] | (n1 & s1[x])
                    n1 |= s1[x]
                ge1[k], ge2[k] = n1, n2
            g = h
        a = b
    full = ~zero if N == 64 else (one << np.uint64(N)) - one
    for c in range(C):
        if not want[c]:
            continue
        for r in range(N):
            if (final == 1 and r != owner[c]) or (final == 2 and r != root) or (final == 3 and r != dest[c]):
                continue
            k = r * C + c
            if init == 1:
                exp = one << np.uint64(owner[c])
            elif init == 2:
                exp = one << np.uint64(root)
            else:
                exp = full
            if ge1[k] != exp or ge2[k] != zero:
                return False
    return True


def accepts(pattern, owner: np.ndarray, want: np.ndarray) -> bool | None:
    """Whether ``pattern`` verifies on the chunks where ``want`` (bool, shape ``(C,)``) is True,
    with ``owner = chunk_owner(pattern)``; None when the pattern has more than
    :data:`MAX_RANKS` ranks (the reference runs alone). No error is raised here.
    AllToAll starts as AllGather (rank r holds row r) and checks each chunk at its
    destination (``chunk_dest``) only."""
    p = pattern
    N, C = p.num_ranks, p.num_chunks
    if N > MAX_RANKS or C == 0:
        return None
    coll = p.collective
    init = {Collective.ALLGATHER: _ALLGATHER, Collective.ALLTOALL: _ALLGATHER,
            Collective.BROADCAST: _BROADCAST}.get(coll, _REDUCTION)
    final = {Collective.REDUCESCATTER: _OWNER, Collective.REDUCE: _ROOT, Collective.ALLTOALL: _DEST}.get(coll, _ALL)
    root = int(p.root) if p.root is not None else 0
    dest = p.chunk_block % N if coll is Collective.ALLTOALL else owner
    a = [np.asarray(x, np.int64) for x in (owner, dest, p.pair_flow, p.chunk_idx, p.step, p.src, p.dst, p.op)]
    return bool(_accepts(N, C, init, final, root, *a, want))

"""The compiled dependency lists of a pattern (numba, ``cache=True``): for each flow, the earlier
flows into its source that touch one of its chunks (:meth:`CollectivePattern.dependencies`).

:func:`dependencies_csr` returns the same CSR arrays as the numpy reference
(:func:`dependencies_numpy`): pairs are keyed by (receiving position, step), sorted, and each
(flow, chunk) pair looks up the writes into its source's position at earlier steps; each flow's
list is then sorted and made unique. ``tests/test_pattern_deps.py`` compares the two exactly.
Why: the tuner builds the lists of every candidate pattern it scores (hundreds per decision),
and on small patterns numpy's per-call overhead was most of that. Source: ours.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["dependencies_csr", "dependencies_numpy"]


@njit(cache=True)
def _deps(F, pf, rpos, spos, st, T):
    P = len(pf)
    rkey = rpos * T + st
    order = np.argsort(rkey, kind="mergesort")
    rs = rkey[order]
    lo = np.searchsorted(rs, spos * T, side="left")
    hi = np.searchsorted(rs, spos * T + st, side="left")
    start = np.zeros(F + 1, np.int64)
    for i in range(P):
        start[pf[i] + 1] += hi[i] - lo[i]
    for f in range(F):
        start[f + 1] += start[f]
    raw = np.empty(start[F], np.int64)
    fill = start[:F].copy()
    for i in range(P):
        f = pf[i]
        for k in range(lo[i], hi[i]):
            raw[fill[f]] = pf[order[k]]
            fill[f] += 1
    # each flow's list sorted and made unique in place (compacted to the front of ``raw``): a
    # list is usually a few flows, so an insertion sort, which allocates nothing (a per-flow
    # np.sort's allocation was most of the call on small patterns); long lists use np.sort
    ptr = np.zeros(F + 1, np.int64)
    n = 0
    for f in range(F):
        a, b = start[f], start[f + 1]
        if b - a > 32:
            raw[a:b] = np.sort(raw[a:b])
        else:
            for i in range(a + 1, b):
                v = raw[i]
                j = i - 1
                while j >= a and raw[j] > v:
                    raw[j + 1] = raw[j]
                    j -= 1
                raw[j + 1] = v
        for k in range(a, b):
            if k == a or raw[k] != raw[k - 1]:
                raw[n] = raw[k]
                n += 1
        ptr[f + 1] = n
    return ptr, raw[:n].copy()


def dependencies_csr(pattern) -> tuple[np.ndarray, np.ndarray]:
    """``(dep_ptr (F+1,), dep_idx)`` of ``pattern`` (see the module docstring), compiled; the
    numpy reference where the (position, step) key would not fit in int64."""
    F, C, T = pattern.num_flows, pattern.num_chunks, pattern.num_steps
    if F == 0 or pattern.num_ranks * C * max(T, 1) >= 1 << 62:
        return dependencies_numpy(pattern)
    pf, ch = pattern.pair_flow, np.asarray(pattern.chunk_idx, np.int64)
    src, dst = np.asarray(pattern.src, np.int64), np.asarray(pattern.dst, np.int64)
    return _deps(F, pf, dst[pf] * C + ch, src[pf] * C + ch, np.asarray(pattern.step, np.int64)[pf], T)


def dependencies_numpy(pattern) -> tuple[np.ndarray, np.ndarray]:
    """The numpy reference of :func:`dependencies_csr` (any size: positions and steps are
    numbered densely when the key would overflow)."""
    p = pattern
    F, C, N = p.num_flows, p.num_chunks, p.num_ranks
    if F == 0:
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    pf = p.pair_flow
    ch = p.chunk_idx
    # key (position, step) = (rank * C + chunk) * T + step must fit in int64: when it
    # would not (steps near 2^31, huge N * C), number positions and steps densely
    # (below 2 * pairs and F), which keeps the key below 2^63 for any pattern in memory
    rpos, spos, st, T = p.dst[pf] * C + ch, p.src[pf] * C + ch, p.step[pf], p.num_steps
    if N * C * T >= 1 << 62:
        _, pos_id = np.unique(np.concatenate((rpos, spos)), return_inverse=True)
        rpos, spos = pos_id[:len(pf)], pos_id[len(pf):]
        steps, step_id = np.unique(p.step, return_inverse=True)
        T, st = len(steps), step_id.reshape(-1)[pf]
    # receive side: key (position, step), ordered by step
    rkey = rpos * T + st
    order = np.argsort(rkey, kind="stable")
    rkey_sorted = rkey[order]
    skey_lo = spos * T
    lo = np.searchsorted(rkey_sorted, skey_lo, side="left")
    hi = np.searchsorted(rkey_sorted, skey_lo + st, side="left")
    cnt = hi - lo
    total = int(cnt.sum())
    if total == 0:
        return np.zeros(F + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    owner = np.repeat(pf, cnt)
    offs = np.arange(total) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    dep = pf[order[np.repeat(lo, cnt) + offs]]
    pair = sorted_unique(owner * F + dep)
    owner, dep = pair // F, pair % F
    ptr = np.zeros(F + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=F), out=ptr[1:])
    return ptr, dep


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an integer array (sort-based; faster than
    ``np.unique``'s hash path on large int64 arrays)."""
    s = np.sort(a)
    if s.size == 0:
        return s
    return s[np.concatenate(([True], s[1:] != s[:-1]))]

"""The compiled engine's event heap (numba, ``cache=True``): four parallel arrays ``ht`` (time),
``hk`` (kind), ``hi`` (id), ``hv`` (version) of one binary min-heap ordered by (time, kind, id).

Entries of kind :data:`TRACKED` (a flow's finish) are *indexed*: ``pos[id, col]`` is the entry's
index in the heap, -1 once popped, so a rate change moves the entry (:func:`heap_move`) instead
of leaving a superseded one behind. :func:`reactccl.netsim.core.run_loop` compiles these in;
core.py pins this file's hash (see there).
"""

from __future__ import annotations

import numpy as np
from numba import njit

TRACKED = 0


@njit(cache=True)
def grow(a, n):
    """A copy of 1-D ``a`` with room for at least ``n`` entries (twice its length if more)."""
    b = np.empty(max(n, 2 * len(a)), a.dtype)
    b[:len(a)] = a
    return b


@njit(cache=True, inline="always")
def _before(ta, ka, ia, tb, kb, ib):         # (time, kind, id) order
    return ta < tb or (ta == tb and (ka < kb or (ka == kb and ia < ib)))


# The sifts move a hole instead of swapping, and are the only code here that loops over heap
# entries: a helper taking arrays, inlined in a loop, would cost numba a reference count
# increment and decrement per array per iteration. They loop on a condition with no ``break``
# or early ``return``: with either, numba kept the reference counts of an inlined helper's array
# arguments (atomic, about 4 ns each) in every call. Those counts took 12% of the samples of a
# 512-rank ring epoch, 9% after this rewrite (the rest: heap_move's arguments in the kernel's
# rate loop, where the heap arrays can be reassigned).
@njit(cache=True, inline="always")
def _up(ht, hk, hi, hv, pos, col, c, t, k, i):
    """The index at which (t, k, i) settles when it rises from hole c (entries moved down)."""
    go = c > 0
    while go:
        p = (c - 1) >> 1
        go = _before(t, k, i, ht[p], hk[p], hi[p])
        if go:
            ht[c], hk[c], hi[c], hv[c] = ht[p], hk[p], hi[p], hv[p]
            if hk[c] == TRACKED:           # a tracked entry knows where it is
                pos[hi[c], col] = c
            c = p
            go = c > 0
    return c


@njit(cache=True, inline="always")
def _down(ht, hk, hi, hv, pos, col, c, n, t, k, i, v):
    """Put (t, k, i, v) into hole c of a heap of size n, moving it down to its place."""
    a = 2 * c + 1
    while a < n:
        if a + 1 < n and _before(ht[a + 1], hk[a + 1], hi[a + 1], ht[a], hk[a], hi[a]):
            a += 1
        if _before(ht[a], hk[a], hi[a], t, k, i):
            ht[c], hk[c], hi[c], hv[c] = ht[a], hk[a], hi[a], hv[a]
            if hk[c] == TRACKED:
                pos[hi[c], col] = c
            c = a
            a = 2 * c + 1
        else:
            a = n
    ht[c], hk[c], hi[c], hv[c] = t, k, i, v
    if k == TRACKED:
        pos[i, col] = c


@njit(cache=True)
def heap_grow(ht, hk, hi, hv, n):
    """Copies of the four heap arrays with room for at least ``n`` entries (call it only when
    they are full: :func:`grow` doubles them)."""
    return grow(ht, n), grow(hk, n), grow(hi, n), grow(hv, n)


@njit(cache=True, inline="always")
def heap_push(ht, hk, hi, hv, pos, col, n, t, k, i, v):
    """Push (t, k, i, v) onto a heap of size n; the arrays must have room (``n < len(ht)``: the
    caller grows them first with :func:`heap_grow`, so that no arrays are returned here, which
    would cost reference counts on every push)."""
    _down(ht, hk, hi, hv, pos, col, _up(ht, hk, hi, hv, pos, col, n, t, k, i), n + 1, t, k, i, v)


@njit(cache=True, inline="always")
def heap_pop(ht, hk, hi, hv, pos, col, n):
    """Remove the top of a heap of size n (read it first at index 0)."""
    if hk[0] == TRACKED:
        pos[hi[0], col] = -1
    n -= 1
    if n > 0:
        _down(ht, hk, hi, hv, pos, col, 0, n, ht[n], hk[n], hi[n], hv[n])


@njit(cache=True, inline="always")
def heap_move(ht, hk, hi, hv, pos, col, c, n, t, v):
    """Give entry c of a heap of size n the time t and version v, and move it to its place."""
    k, i = hk[c], hi[c]
    _down(ht, hk, hi, hv, pos, col, _up(ht, hk, hi, hv, pos, col, c, t, k, i), n, t, k, i, v)


@njit(cache=True)
def heapify(ht, hk, hi, hv, pos, col, n):
    """Order the first n entries as a heap (Floyd's bottom-up construction)."""
    for c in range(n // 2 - 1, -1, -1):
        _down(ht, hk, hi, hv, pos, col, c, n, ht[c], hk[c], hi[c], hv[c])

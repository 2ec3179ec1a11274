"""The compiled engine's per-run set-up, compiled too: one call turns a flow table and the drawn
ECMP ports into the flat arrays :func:`reactccl.netsim.core.run_loop` starts from.

A *flow table* holds every flow's path for each of K ports (``tlen``/``tstart`` shape
``(K, F)`` into one flat ``tlinks``, latency ``tlat (K, F)``); ``rows (F,)`` picks one row per
flow for this run. Doing this here rather than in numpy keeps a small epoch (the 8-rank tree of
``bench/bench_netsim.py``: 28 flows) from paying tens of numpy calls.

This module uses nothing of :mod:`.core`; :func:`reactccl.netsim.core.run_table` calls it and
pins this file's hash (a numba cache entry is checked against its own source file only).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def prepare(cap, tlen, tstart, tlinks, tlat, rows, waiting, release, per_links, backlog):
    """One run's paths, link slots and releases.

    Args: the table (see the module docstring), ``rows (F,)``, ``waiting``/``release (F,)``,
    ``per_links`` the periodic sources' links and ``backlog`` the slots each needs per link
    (``max_backlog + 1``).

    Returns ``(plinks, pstart, plen, lat, pathcap, lstart, lbuf, rel_t, rel_f)``: the chosen
    paths flat (``pstart``/``plen (F,)``), their latency and smallest capacity ``(F,)``, each
    link's first slot in ``lbuf`` (every flow that may cross it, plus ``backlog`` per periodic
    source on it), and the time and id of every flow that waits on nothing and has a release.
    """
    L, F = len(cap), len(rows)
    total = 0
    for f in range(F):
        total += tlen[rows[f], f]
    plinks = np.empty(total, np.int64)
    pstart = np.empty(F, np.int64)
    plen = np.empty(F, np.int64)
    lat = np.empty(F)
    pathcap = np.empty(F)
    lstart = np.zeros(L, np.int64)
    q = 0
    for f in range(F):
        r = rows[f]
        n, s = tlen[r, f], tstart[r, f]
        pc = np.inf
        for h in range(n):
            l = tlinks[s + h]
            plinks[q + h] = l
            lstart[l] += 1
            if cap[l] < pc:
                pc = cap[l]
        lat[f] = tlat[r, f]
        pathcap[f] = pc
        pstart[f] = q
        plen[f] = n
        q += n
    for x in range(len(per_links)):
        lstart[per_links[x]] += backlog
    tot = 0
    for l in range(L):
        n = lstart[l]
        lstart[l] = tot
        tot += n
    lbuf = np.zeros(max(tot, 1), np.int64)
    nrel = 0
    for f in range(F):
        if waiting[f] == 0 and release[f] != np.inf:
            nrel += 1
    rel_t = np.empty(nrel)
    rel_f = np.empty(nrel, np.int64)
    nrel = 0
    for f in range(F):
        if waiting[f] == 0 and release[f] != np.inf:
            rel_t[nrel], rel_f[nrel] = release[f], f
            nrel += 1
    return plinks, pstart, plen, lat, pathcap, lstart, lbuf, rel_t, rel_f

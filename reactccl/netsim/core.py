"""The compiled event loop of :class:`~reactccl.netsim.fast.CompiledEngine` (numba, ``cache=True``).

Same model, same events and same batching as the pure-Python
:class:`~reactccl.netsim.engine.FluidEngine` (the reference); only the data layout differs:

* a flow's path is a slice of one flat link buffer (``pstart``/``plen``), and each link keeps
  its active flows in a fixed slot range of ``lbuf`` (sized up front: the flows that ever cross
  it, plus ``max_backlog + 1`` per periodic source on it); ``ppos`` is each (flow, hop)'s slot,
  so adding or removing a flow is O(hops);
* after a batch the connected component(s) of the flow-link graph touched by the batch are
  found with stamp arrays (no sets) and re-solved by the rounds of
  :func:`~reactccl.netsim.maxmin.max_min_rates` (Bertsekas & Gallager §6.5.2), done as loops
  over the component's (flow, link) pairs: O(P) per round for P pairs, rounds = levels of
  bottlenecks fixed in parallel (a few on a fabric of equal links);
* the event heap is four parallel arrays ordered by (time, kind, id).

Arrays that grow (flows emitted by periodic sources, the heap) are reallocated here and handed
back. The kernel returns a status: 0 done, 1 no events left with watched flows pending,
2 too many events, 3 a periodic source over its backlog (the source in ``si[_S_ARG]``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

SEND_DONE, ARRIVE, RELEASE, PERIODIC = 0, 1, 2, 3
# integer scalars in ``si``
S_NFLOWS, S_NPL, S_HSIZE, S_EVENTS, S_BATCHES, S_PENDING, S_MAXEV, S_MAXBL, S_ARG, S_NSTATIC, S_SOLVES, S_SOLVED, S_HMAX, S_ROUNDS = range(14)
NUM_SI = 14
TIME_TOL = 1e-12
RATE_TOL = 1e-12
MAXMIN_TOL = 1e-12  # = reactccl.netsim.maxmin.REL_TOL
FREEZE_TOL = 1e-9


@njit(cache=True)
def _grow_f(a, n):
    b = np.empty(max(n, 2 * len(a)), a.dtype)
    b[:len(a)] = a
    return b


@njit(cache=True)
def _less(ht, hk, hi, a, b):
    if ht[a] != ht[b]:
        return ht[a] < ht[b]
    if hk[a] != hk[b]:
        return hk[a] < hk[b]
    return hi[a] < hi[b]


@njit(cache=True)
def _swap(ht, hk, hi, hv, a, b):
    ht[a], ht[b] = ht[b], ht[a]
    hk[a], hk[b] = hk[b], hk[a]
    hi[a], hi[b] = hi[b], hi[a]
    hv[a], hv[b] = hv[b], hv[a]


@njit(cache=True)
def heap_push(ht, hk, hi, hv, n, t, k, i, v):
    """Push (t, k, i, v) onto a heap of size n; returns the (maybe grown) arrays."""
    if n >= len(ht):
        ht, hk, hi, hv = _grow_f(ht, n + 1), _grow_f(hk, n + 1), _grow_f(hi, n + 1), _grow_f(hv, n + 1)
    ht[n], hk[n], hi[n], hv[n] = t, k, i, v
    c = n
    while c > 0:
        p = (c - 1) >> 1
        if _less(ht, hk, hi, c, p):
            _swap(ht, hk, hi, hv, c, p)
            c = p
        else:
            break
    return ht, hk, hi, hv


@njit(cache=True)
def heap_pop(ht, hk, hi, hv, n):
    """Remove the top of a heap of size n (read it first at index 0)."""
    n -= 1
    _swap(ht, hk, hi, hv, 0, n)
    c = 0
    while True:
        a = 2 * c + 1
        if a >= n:
            break
        b = a + 1
        m = b if b < n and _less(ht, hk, hi, b, a) else a
        if _less(ht, hk, hi, m, c):
            _swap(ht, hk, hi, hv, m, c)
            c = m
        else:
            break


# columns of the per-flow float array FF and int array FI
REM, RATE, TLAST, LAT, START, SEND_END, END, PATHCAP, NEWRATE = range(9)
PSTART, PLEN, WAITING, VERSION, WATCHED, ORIGIN, FMARK, FIXED, FRESH = range(9)
NF_COLS, NI_COLS = 9, 9


@njit(cache=True)
def water_fill(comp_f, comp_l, cap, lbuf, lstart, lcnt, plinks, FF, FI, lin, stamp, crem, nrem, share, bott,
               unfixed):
    """Max-min rates (column NEWRATE) of the flows ``comp_f`` (marked ``FI[f, FMARK] == stamp``)
    over the links ``comp_l`` (marked ``lin[l] == stamp``) and each flow's own path capacity;
    other flows on those links are frozen at their rates (``FF[f, RATE]``) and only take
    capacity. Rounds as :func:`~reactccl.netsim.maxmin.max_min_rates` (same tolerance): every
    link offers its remaining capacity in equal shares; a flow's candidate is its smallest share
    (at most its path capacity); a link is a bottleneck when none of its unfixed flows is held
    lower elsewhere; flows through a bottleneck, or at their path capacity, are fixed."""
    for l in comp_l:
        c = cap[l]
        n = 0
        base = lstart[l]
        for s in range(lcnt[l]):
            f = lbuf[base + s]
            if FI[f, FMARK] == stamp:
                n += 1
            else:
                c -= FF[f, RATE]
        crem[l] = c if c > 0.0 else 0.0
        nrem[l] = n
    nu = 0
    for f in comp_f:
        if nu >= len(unfixed):
            unfixed = _grow_f(unfixed, nu + 1)
        unfixed[nu] = f
        nu += 1
    rounds = 0
    while nu > 0:
        rounds += 1
        for l in comp_l:
            if nrem[l] > 0:
                share[l] = crem[l] / nrem[l]
                bott[l] = 1
        for u in range(nu):
            f = unfixed[u]
            p0, k = FI[f, PSTART], FI[f, PLEN]
            m = FF[f, PATHCAP]
            for h in range(k):
                l = plinks[p0 + h]
                if lin[l] == stamp and share[l] < m:
                    m = share[l]
            FF[f, NEWRATE] = m
            for h in range(k):
                l = plinks[p0 + h]
                if lin[l] == stamp and m < share[l] * (1.0 - MAXMIN_TOL):
                    bott[l] = 0
        keep = 0
        for u in range(nu):
            f = unfixed[u]
            p0, k = FI[f, PSTART], FI[f, PLEN]
            r = FF[f, NEWRATE]
            hit = r >= FF[f, PATHCAP] * (1.0 - MAXMIN_TOL)
            if not hit:
                for h in range(k):
                    l = plinks[p0 + h]
                    if lin[l] == stamp and bott[l]:
                        hit = True
                        break
            if hit:
                for h in range(k):
                    l = plinks[p0 + h]
                    if lin[l] == stamp:
                        c = crem[l] - r
                        crem[l] = c if c > 0.0 else 0.0
                        nrem[l] -= 1
            else:
                unfixed[keep] = f
                keep += 1
        nu = keep
        for l in comp_l:
            bott[l] = 0
    return unfixed, rounds


@njit(cache=True)
def _grow_rows(a, n):
    b = np.zeros((max(n, 2 * a.shape[0]), a.shape[1]), a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=True)
def _feed(ptr, kids, f, jwait, jptr, jkids, FI, started, ns, stack):
    """One input arrives at each child of flow ``f`` (CSR ``ptr``/``kids``); flows whose last
    input it was go to ``started[ns:]``, joins whose last input it was fire and feed their
    children. Returns the new ``ns``. ``stack`` holds at most every child edge once."""
    top = 0
    for e in range(ptr[f], ptr[f + 1]):
        stack[top] = kids[e]
        top += 1
    while top > 0:
        top -= 1
        c = stack[top]
        if c >= 0:
            FI[c, WAITING] -= 1
            if FI[c, WAITING] == 0:
                started[ns] = c
                ns += 1
        else:
            j = ~c
            jwait[j] -= 1
            if jwait[j] == 0:
                for e in range(jptr[j], jptr[j + 1]):
                    stack[top] = jkids[e]
                    top += 1
    return ns


@njit(cache=True)
def run_loop(cap, child_ptr, child, sent_ptr, sent, jwait, jptr, jkids,
             per_ptr, per_links, per_bits, per_lat, per_period, next_periodic, inflight,
             lbuf, lstart, lcnt, plinks, ppos, FF, FI, ht, hk, hi, hv, sf, si):
    """Run until no watched flow is pending (see the module docstring for the status codes).
    ``sf[0]`` is the time; ``si`` the integer scalars (``S_*``). Returns
    ``(status, plinks, ppos, FF, FI, ht, hk, hi, hv)``."""
    L = len(cap)
    nstatic = si[S_NSTATIC]
    lmark = np.zeros(L, np.int64)
    lin = np.zeros(L, np.int64)
    lsum = np.zeros(L)                      # sum of the path capacities of the active flows on each link
    seeds = np.empty(L, np.int64)
    crem = np.zeros(L)
    nrem = np.zeros(L, np.int64)
    share = np.zeros(L)
    bott = np.zeros(L, np.int8)
    unfixed = np.empty(64, np.int64)
    hsize = si[S_HSIZE]
    FC = FF.shape[0]
    started = np.empty(FC, np.int64)
    stopped = np.empty(FC, np.int64)
    comp_f = np.empty(FC, np.int64)
    comp_l = np.empty(L, np.int64)
    stack = np.empty(len(child) + len(sent) + len(jkids) + 1, np.int64)
    status = 0
    while si[S_PENDING] > 0:
        if si[S_EVENTS] > si[S_MAXEV]:
            status = 2
            break
        if hsize == 0:
            status = 1
            break
        t = ht[0]
        limit = t + abs(t) * sf[1]
        nst = 0
        nsp = 0
        si[S_BATCHES] += 1
        stamp = si[S_BATCHES]
        while hsize > 0 and ht[0] <= limit:
            k, i, v = hk[0], hi[0], hv[0]
            heap_pop(ht, hk, hi, hv, hsize)
            hsize -= 1
            if k == SEND_DONE:
                if v != FI[i, VERSION]:
                    continue
                si[S_EVENTS] += 1
                stopped[nsp] = i
                nsp += 1
                o = FI[i, ORIGIN]
                if o >= 0:
                    inflight[o] -= 1
                FF[i, SEND_END] = t
                FF[i, REM] = 0.0
                ht, hk, hi, hv = heap_push(ht, hk, hi, hv, hsize, t + FF[i, LAT], ARRIVE, i, 0)
                hsize += 1
                if i < nstatic:
                    nst = _feed(sent_ptr, sent, i, jwait, jptr, jkids, FI, started, nst, stack)
            elif k == ARRIVE:
                si[S_EVENTS] += 1
                FF[i, END] = t
                if FI[i, WATCHED]:
                    si[S_PENDING] -= 1
                if i < nstatic:
                    nst = _feed(child_ptr, child, i, jwait, jptr, jkids, FI, started, nst, stack)
            elif k == RELEASE:
                si[S_EVENTS] += 1
                started[nst] = i
                nst += 1
            else:  # periodic source i emits a flow
                si[S_EVENTS] += 1
                fid = si[S_NFLOWS]
                if fid >= FF.shape[0]:
                    FF, FI = _grow_rows(FF, fid + 1), _grow_rows(FI, fid + 1)
                    started, stopped = _grow_f(started, fid + 1), _grow_f(stopped, fid + 1)
                    comp_f = np.empty(FF.shape[0], np.int64)
                n = per_ptr[i + 1] - per_ptr[i]
                q = si[S_NPL]
                if q + n > len(plinks):
                    plinks, ppos = _grow_f(plinks, q + n), _grow_f(ppos, q + n)
                pc = np.inf
                for h in range(n):
                    plinks[q + h] = per_links[per_ptr[i] + h]
                    pc = min(pc, cap[plinks[q + h]])
                si[S_NPL] = q + n
                si[S_NFLOWS] = fid + 1
                FF[fid, :] = np.nan
                FF[fid, REM] = per_bits[i]
                FF[fid, RATE] = 0.0
                FF[fid, TLAST] = 0.0
                FF[fid, LAT] = per_lat[i]
                FF[fid, PATHCAP] = pc
                FI[fid, :] = 0
                FI[fid, PSTART] = q
                FI[fid, PLEN] = n
                FI[fid, ORIGIN] = i
                inflight[i] += 1
                sf[0] = t
                if inflight[i] > si[S_MAXBL]:
                    si[S_ARG] = i
                    status = 3
                    break
                started[nst] = fid
                nst += 1
                next_periodic[i] = t + per_period[i]
                ht, hk, hi, hv = heap_push(ht, hk, hi, hv, hsize, t + per_period[i], PERIODIC, i, 0)
                hsize += 1
        if status:
            break
        sf[0] = t
        # ---- reschedule (see the module docstring): update link lists and sums, find the flows
        # whose rate may change, re-solve them
        lam = np.inf                       # flows slower than this keep their rates
        nseed = 0
        for x in range(nsp):
            i = stopped[x]
            if FF[i, RATE] < lam:
                lam = FF[i, RATE]
            p0 = FI[i, PSTART]
            for h in range(FI[i, PLEN]):
                l = plinks[p0 + h]
                slot = ppos[p0 + h]
                last = lstart[l] + lcnt[l] - 1
                g = lbuf[last]
                if g != i:
                    lbuf[slot] = g
                    g0 = FI[g, PSTART]
                    for hh in range(FI[g, PLEN]):
                        if plinks[g0 + hh] == l:
                            ppos[g0 + hh] = slot
                            break
                lcnt[l] -= 1
                lsum[l] = lsum[l] - FF[i, PATHCAP] if lcnt[l] > 0 else 0.0
                if lmark[l] != stamp:
                    lmark[l] = stamp
                    seeds[nseed] = l
                    nseed += 1
            FF[i, RATE] = 0.0
        for x in range(nst):
            i = started[x]
            p0 = FI[i, PSTART]
            for h in range(FI[i, PLEN]):
                l = plinks[p0 + h]
                slot = lstart[l] + lcnt[l]
                lbuf[slot] = i
                ppos[p0 + h] = slot
                lcnt[l] += 1
                lsum[l] += FF[i, PATHCAP]
                if lmark[l] != stamp:
                    lmark[l] = stamp
                    seeds[nseed] = l
                    nseed += 1
            FF[i, START] = t
            FF[i, TLAST] = t
            FI[i, FRESH] = stamp
        for x in range(nst):
            i = started[x]
            p0 = FI[i, PSTART]
            for h in range(FI[i, PLEN]):
                l = plinks[p0 + h]
                y = cap[l] / lcnt[l]
                if y < lam:
                    lam = y
        lam *= 1.0 - FREEZE_TOL
        # seeds: the unfrozen flows on changed links; grow through binding links to unfrozen flows
        ncf = 0
        ncl = 0
        for x in range(nseed):
            l = seeds[x]
            base = lstart[l]
            for s in range(lcnt[l]):
                f = lbuf[base + s]
                if FI[f, FMARK] != stamp and (FI[f, FRESH] == stamp or FF[f, RATE] >= lam):
                    FI[f, FMARK] = stamp
                    comp_f[ncf] = f
                    ncf += 1
        q = 0
        while q < ncf:
            f = comp_f[q]
            q += 1
            p0 = FI[f, PSTART]
            for h in range(FI[f, PLEN]):
                l = plinks[p0 + h]
                if lin[l] == stamp or lcnt[l] < 2 or lsum[l] <= cap[l]:
                    continue                # done, or slack: its flows' path capacities imply it
                lin[l] = stamp
                comp_l[ncl] = l
                ncl += 1
                base = lstart[l]
                for s in range(lcnt[l]):
                    g = lbuf[base + s]
                    if FI[g, FMARK] != stamp and (FI[g, FRESH] == stamp or FF[g, RATE] >= lam):
                        FI[g, FMARK] = stamp
                        comp_f[ncf] = g
                        ncf += 1
        if ncf == 0:
            continue
        si[S_SOLVES] += 1
        si[S_SOLVED] += ncf
        if hsize > si[S_HMAX]:
            si[S_HMAX] = hsize
        if ncl == 0:
            for x in range(ncf):
                FF[comp_f[x], NEWRATE] = FF[comp_f[x], PATHCAP]
        else:
            unfixed, rounds = water_fill(comp_f[:ncf], comp_l[:ncl], cap, lbuf, lstart, lcnt, plinks, FF, FI, lin, stamp, crem, nrem,
                                 share, bott, unfixed)
            si[S_ROUNDS] += rounds
        for x in range(ncf):
            f = comp_f[x]
            r = FF[f, NEWRATE]
            old = FF[f, RATE]
            if FI[f, FRESH] != stamp and abs(r - old) <= RATE_TOL * old:
                continue
            left = FF[f, REM] - old * (t - FF[f, TLAST])
            left = left if left > 0.0 else 0.0
            FF[f, REM] = left
            FF[f, RATE] = r
            FF[f, TLAST] = t
            FI[f, VERSION] += 1
            if left != np.inf:
                ht, hk, hi, hv = heap_push(ht, hk, hi, hv, hsize, t + left / r, SEND_DONE, f, FI[f, VERSION])
                hsize += 1
    si[S_HSIZE] = hsize
    return status, plinks, ppos, FF, FI, ht, hk, hi, hv

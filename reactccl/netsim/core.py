"""The compiled event loop of :class:`~reactccl.netsim.fast.CompiledEngine` (numba, ``cache=True``).

Same model, same events and same batching as the pure-Python
:class:`~reactccl.netsim.engine.FluidEngine` (the reference); only the data layout differs:

* a flow's path is a slice of one flat link buffer (``pstart``/``plen``), and each link keeps
  its active flows in a fixed slot range of ``lbuf`` (sized up front: the flows that ever cross
  it, plus ``max_backlog + 1`` per periodic source on it); ``ppos`` is each (flow, hop)'s slot,
  so adding or removing a flow is O(hops);
* after a batch only the flows whose rate can change are re-solved (exact, not an
  approximation): let lam be the lowest level the batch can touch, the old rate of a flow that
  stopped, or capacity / flow count on a started flow's links (no link of a changed flow can
  saturate below it, before or after, so progressive filling is the same below lam and every
  flow slower than lam keeps its rate). A link whose active flows' path capacities add up to at
  most its capacity is slack: each flow's own path capacity implies it. The re-solved set is the
  flows at or above lam on changed links, grown through non-slack links to flows at or above
  lam; flows outside it keep their rates (their sub-problem is unchanged). It is solved by the
  rounds of :func:`~reactccl.netsim.maxmin.max_min_rates` (Bertsekas & Gallager §6.5.2) over its
  non-slack links and each flow's path capacity, the slower flows there taking their share of
  capacity as fixed;
* the event heap is four parallel arrays ordered by (time, kind, id), given in any order and
  heapified first.

Arrays that grow (flows emitted by periodic sources, the heap) are reallocated here and handed
back. The kernel returns a status: 0 done, 1 no events left with watched flows pending,
2 too many events, 3 a periodic source over its backlog (the source in ``si[S_ARG]``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

SEND_DONE, ARRIVE, RELEASE, PERIODIC = 0, 1, 2, 3
# integer scalars in ``si``
(S_NFLOWS, S_NPL, S_HSIZE, S_EVENTS, S_BATCHES, S_PENDING, S_MAXEV, S_MAXBL, S_ARG, S_NSTATIC, S_SOLVES, S_SOLVED,
 S_HMAX, S_ROUNDS, S_PASSES, S_FULL) = range(16)
NUM_SI = 16
RATE_TOL = 1e-12
MAXMIN_TOL = 1e-12  # = reactccl.netsim.maxmin.REL_TOL
FREEZE_TOL = 1e-9
CHECK_TOL = 1e-11


@njit(cache=True)
def _grow_f(a, n):
    b = np.empty(max(n, 2 * len(a)), a.dtype)
    b[:len(a)] = a
    return b


@njit(cache=True, inline="always")
def _less(ht, hk, hi, a, b):                 # (time, kind, id) order
    return ht[a] < ht[b] or (ht[a] == ht[b] and (hk[a] < hk[b] or (hk[a] == hk[b] and hi[a] < hi[b])))


@njit(cache=True, inline="always")
def _swap(ht, hk, hi, hv, FI, a, b):
    ht[a], ht[b] = ht[b], ht[a]
    hk[a], hk[b] = hk[b], hk[a]
    hi[a], hi[b] = hi[b], hi[a]
    hv[a], hv[b] = hv[b], hv[a]
    if hk[a] == SEND_DONE:                   # a flow's finish entry knows where it is
        FI[hi[a], HPOS] = a
    if hk[b] == SEND_DONE:
        FI[hi[b], HPOS] = b


@njit(cache=True, inline="always")
def _sift_up(ht, hk, hi, hv, FI, c):
    while c > 0:
        p = (c - 1) >> 1
        if _less(ht, hk, hi, c, p):
            _swap(ht, hk, hi, hv, FI, c, p)
            c = p
        else:
            break
    return c


@njit(cache=True, inline="always")
def heap_push(ht, hk, hi, hv, FI, n, t, k, i, v):
    """Push (t, k, i, v) onto a heap of size n; returns the (maybe grown) arrays."""
    if n >= len(ht):
        ht, hk, hi, hv = _grow_f(ht, n + 1), _grow_f(hk, n + 1), _grow_f(hi, n + 1), _grow_f(hv, n + 1)
    ht[n], hk[n], hi[n], hv[n] = t, k, i, v
    if k == SEND_DONE:
        FI[i, HPOS] = n
    _sift_up(ht, hk, hi, hv, FI, n)
    return ht, hk, hi, hv


@njit(cache=True, inline="always")
def heap_pop(ht, hk, hi, hv, FI, n):
    """Remove the top of a heap of size n (read it first at index 0)."""
    n -= 1
    _swap(ht, hk, hi, hv, FI, 0, n)
    if hk[n] == SEND_DONE:
        FI[hi[n], HPOS] = -1
    _sift_down(ht, hk, hi, hv, FI, 0, n)


@njit(cache=True, inline="always")
def heap_move(ht, hk, hi, hv, FI, c, n, t, v):
    """Give entry c of a heap of size n the time t and version v, and move it to its place."""
    ht[c], hv[c] = t, v
    _sift_down(ht, hk, hi, hv, FI, _sift_up(ht, hk, hi, hv, FI, c), n)


@njit(cache=True)
def heapify(ht, hk, hi, hv, FI, n):
    """Order the first n entries as a heap (Floyd's bottom-up construction)."""
    for c in range(n // 2 - 1, -1, -1):
        _sift_down(ht, hk, hi, hv, FI, c, n)


@njit(cache=True, inline="always")
def _sift_down(ht, hk, hi, hv, FI, c, n):
    """Move entry c of a heap of size n down to its place."""
    while True:
        a = 2 * c + 1
        if a >= n:
            break
        b = a + 1
        m = b if b < n and _less(ht, hk, hi, b, a) else a
        if _less(ht, hk, hi, m, c):
            _swap(ht, hk, hi, hv, FI, m, c)
            c = m
        else:
            break


# columns of the per-flow float array FF and int array FI
REM, RATE, TLAST, LAT, START, SEND_END, END, PATHCAP, NEWRATE = range(9)
PSTART, PLEN, WAITING, VERSION, WATCHED, ORIGIN, FMARK, CHECKED, FRESH, HPOS = range(10)
NF_COLS, NI_COLS = 9, 10


@njit(cache=True, error_model="numpy")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _add_links(f, plinks, FI, lcnt, lsum, cap, lin, stamp, comp_l, ncl):
    """Add flow ``f``'s non-slack links (more than one flow, path capacities above the capacity)
    to ``comp_l[:ncl]``; returns the new count."""
    p0 = FI[f, PSTART]
    for h in range(FI[f, PLEN]):
        l = plinks[p0 + h]
        if lin[l] != stamp and lcnt[l] >= 2 and lsum[l] > cap[l]:
            lin[l] = stamp
            comp_l[ncl] = l
            ncl += 1
    return ncl


@njit(cache=True)
def _has_bottleneck(g, stamp, cpass, cap, lbuf, lstart, lcnt, lsum, plinks, FF, FI, lchk, lstat):
    """Whether flow ``g`` (rate: NEWRATE if in the re-solved set, else RATE) runs at its path
    capacity or crosses a saturated non-slack link on which no flow gets more."""
    r = FF[g, NEWRATE] if FI[g, FMARK] == stamp else FF[g, RATE]
    if r >= FF[g, PATHCAP] * (1.0 - CHECK_TOL):
        return True
    p0 = FI[g, PSTART]
    for h in range(FI[g, PLEN]):
        l = plinks[p0 + h]
        if lcnt[l] < 2 or lsum[l] <= cap[l]:
            continue
        if lchk[l] != cpass:                 # this link's load and top rate in this pass
            lchk[l] = cpass
            tot, top = 0.0, 0.0
            base = lstart[l]
            for s in range(lcnt[l]):
                f = lbuf[base + s]
                x = FF[f, NEWRATE] if FI[f, FMARK] == stamp else FF[f, RATE]
                tot += x
                if x > top:
                    top = x
            lstat[l, 0], lstat[l, 1] = tot, top
        if lstat[l, 0] >= cap[l] * (1.0 - CHECK_TOL) and r >= lstat[l, 1] * (1.0 - CHECK_TOL):
            return True
    return False


@njit(cache=True)
def _state(bits, lat, pathcap, pstart, plen, waiting, watched, origin, nper, rel_t, rel_f, ht0, hk0, hi0):
    """The per-flow arrays FF, FI (room for 64 flows per periodic source) and the start heap
    (releases, then the entries ``ht0..hi0``; heapified by the caller)."""
    F = len(bits)
    FC = max(F + 64 * nper, 1)
    FF = np.zeros((FC, NF_COLS))
    FI = np.zeros((FC, NI_COLS), np.int64)
    for f in range(F):
        FF[f, REM], FF[f, LAT], FF[f, PATHCAP] = bits[f], lat[f], pathcap[f]
        FF[f, START] = FF[f, SEND_END] = FF[f, END] = np.nan
        FI[f, PSTART], FI[f, PLEN], FI[f, WAITING], FI[f, WATCHED] = pstart[f], plen[f], waiting[f], watched[f]
        FI[f, ORIGIN] = origin[f]
    FI[F:, ORIGIN] = -1
    FI[:, HPOS] = -1                          # no finish entry in the heap
    n = max(len(rel_t) + len(ht0), 1)
    ht, hk, hi, hv = np.zeros(n), np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    m = len(rel_t)
    ht[:m], hk[:m], hi[:m] = rel_t, RELEASE, rel_f
    ht[m:m + len(ht0)], hk[m:m + len(ht0)], hi[m:m + len(ht0)] = ht0, hk0, hi0
    return FF, FI, ht, hk, hi, hv, m + len(ht0)


@njit(cache=True, error_model="numpy")
def run_loop(cap, child_ptr, child, sent_ptr, sent, jwait, jptr, jkids,
             per_ptr, per_links, per_bits, per_lat, per_period, next_periodic, inflight,
             lbuf, lstart, plinks, pstart, plen, lat, pathcap, bits, waiting, watched, origin, rel_t, rel_f,
             ht0, hk0, hi0, sf, si):
    """Run until no watched flow is pending (see the module docstring for the status codes).
    Inputs as :func:`reactccl.netsim.prepare.prepare` returns them, plus each flow's ``bits``,
    ``waiting``, ``watched`` and ``origin`` (periodic source of a carried-over burst, -1: none)
    and heap entries ``ht0..hi0`` (periodic sources' first emissions). ``jwait`` is counted
    down. ``sf`` is ``[time, coalesce]``; ``si`` the integer scalars (``S_*``). Returns
    ``(status, plinks, FF, FI)`` (the run cannot be continued)."""
    L = len(cap)
    nstatic = si[S_NSTATIC] = si[S_NFLOWS] = len(bits)
    si[S_NPL] = len(plinks)
    FF, FI, ht, hk, hi, hv, hsize = _state(bits, lat, pathcap, pstart, plen, waiting, watched, origin,
                                          len(per_period), rel_t, rel_f, ht0, hk0, hi0)
    lcnt, ppos = np.zeros(L, np.int64), np.zeros(len(plinks), np.int64)
    lmark, lin, lchk = np.zeros(L, np.int64), np.zeros(L, np.int64), np.zeros(L, np.int64)
    lstat, cpass = np.zeros((L, 2)), si[S_PASSES]
    lsum = np.zeros(L)                      # sum of the path capacities of the active flows on each link
    crem, nrem, share = np.zeros(L), np.zeros(L, np.int64), np.zeros(L)
    bott, unfixed = np.zeros(L, np.int8), np.empty(64, np.int64)
    FC = FF.shape[0]
    started, stopped, comp_f = np.empty(FC, np.int64), np.empty(FC, np.int64), np.empty(FC, np.int64)
    seeds, comp_l = np.empty(L, np.int64), np.empty(L, np.int64)
    stack = np.empty(len(child) + len(sent) + len(jkids) + 1, np.int64)
    status = 0
    heapify(ht, hk, hi, hv, FI, hsize)
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
            heap_pop(ht, hk, hi, hv, FI, hsize)
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
                ht, hk, hi, hv = heap_push(ht, hk, hi, hv, FI, hsize, t + FF[i, LAT], ARRIVE, i, 0)
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
                FI[fid, HPOS] = -1
                inflight[i] += 1
                sf[0] = t
                if inflight[i] > si[S_MAXBL]:
                    si[S_ARG] = i
                    status = 3
                    break
                started[nst] = fid
                nst += 1
                next_periodic[i] = t + per_period[i]
                ht, hk, hi, hv = heap_push(ht, hk, hi, hv, FI, hsize, t + per_period[i], PERIODIC, i, 0)
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
        # A = the flows at or above lam on changed links (with their non-slack links); solve A with the
        # other flows fixed, then check every flow on those links still has a bottleneck (Bertsekas &
        # Gallager: a feasible allocation is max-min iff each flow crosses a saturated link where no
        # flow gets more, or runs at its path capacity); a flow without one joins A; repeat.
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
        for x in range(ncf):
            ncl = _add_links(comp_f[x], plinks, FI, lcnt, lsum, cap, lin, stamp, comp_l, ncl)
        if ncf == 0:
            continue
        si[S_SOLVES] += 1
        if hsize > si[S_HMAX]:
            si[S_HMAX] = hsize
        while True:
            if ncl == 0:
                for x in range(ncf):
                    FF[comp_f[x], NEWRATE] = FF[comp_f[x], PATHCAP]
                break
            unfixed, rounds = water_fill(comp_f[:ncf], comp_l[:ncl], cap, lbuf, lstart, lcnt, plinks, FF, FI, lin,
                                         stamp, crem, nrem, share, bott, unfixed)
            si[S_ROUNDS] += rounds
            si[S_PASSES] += 1
            cpass += 1
            before, full = ncf, False
            for y in range(ncl):
                l = comp_l[y]
                base = lstart[l]
                for s in range(lcnt[l]):
                    g = lbuf[base + s]
                    if FI[g, FMARK] != stamp and FF[g, RATE] < lam:
                        continue                  # below lam: its rate is exact (module docstring)
                    if FI[g, CHECKED] == cpass:
                        continue
                    FI[g, CHECKED] = cpass
                    if _has_bottleneck(g, stamp, cpass, cap, lbuf, lstart, lcnt, lsum, plinks, FF, FI, lchk, lstat):
                        continue
                    if FI[g, FMARK] != stamp:
                        FI[g, FMARK] = stamp
                        FF[g, NEWRATE] = FF[g, RATE]       # the same rate until the next solve
                        comp_f[ncf] = g
                        ncf += 1
                        ncl = _add_links(g, plinks, FI, lcnt, lsum, cap, lin, stamp, comp_l, ncl)
                    else:                     # flows on its links that get more than it join A
                        r = FF[g, NEWRATE]
                        more = False
                        p0 = FI[g, PSTART]
                        for h in range(FI[g, PLEN]):
                            m = plinks[p0 + h]
                            if lcnt[m] < 2 or lsum[m] <= cap[m]:
                                continue
                            bm = lstart[m]
                            for z in range(lcnt[m]):
                                u = lbuf[bm + z]
                                if FI[u, FMARK] != stamp and FF[u, RATE] > r * (1.0 + CHECK_TOL):
                                    FI[u, FMARK] = stamp
                                    FF[u, NEWRATE] = FF[u, RATE]
                                    comp_f[ncf] = u
                                    ncf += 1
                                    ncl = _add_links(u, plinks, FI, lcnt, lsum, cap, lin, stamp, comp_l, ncl)
                                    more = True
                        if not more:
                            full = True
            if ncf > before:                  # new members: solve again
                continue
            if full:                          # no way to repair locally: the whole component, once
                q = 0
                while q < ncf:
                    f = comp_f[q]
                    q += 1
                    p0 = FI[f, PSTART]
                    for h in range(FI[f, PLEN]):
                        l = plinks[p0 + h]
                        if lcnt[l] < 2 or lsum[l] <= cap[l]:
                            continue
                        if lin[l] != stamp:
                            lin[l] = stamp
                            comp_l[ncl] = l
                            ncl += 1
                        base = lstart[l]
                        for s in range(lcnt[l]):
                            g = lbuf[base + s]
                            if FI[g, FMARK] != stamp:
                                FI[g, FMARK] = stamp
                                comp_f[ncf] = g
                                ncf += 1
                unfixed, rounds = water_fill(comp_f[:ncf], comp_l[:ncl], cap, lbuf, lstart, lcnt, plinks, FF, FI,
                                             lin, stamp, crem, nrem, share, bott, unfixed)
                si[S_FULL] += 1
            break
        si[S_SOLVED] += ncf
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
            if left != np.inf:                # its finish entry moves (no stale entries are left)
                if FI[f, HPOS] >= 0:
                    heap_move(ht, hk, hi, hv, FI, FI[f, HPOS], hsize, t + left / r, FI[f, VERSION])
                else:
                    ht, hk, hi, hv = heap_push(ht, hk, hi, hv, FI, hsize, t + left / r, SEND_DONE, f,
                                               FI[f, VERSION])
                    hsize += 1
    return status, plinks, FF, FI

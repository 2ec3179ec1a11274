"""The compiled event loop of :class:`~reactccl.netsim.compiled.CompiledEngine` (numba, ``cache=True``).

Same model, same events and same batching as the pure-Python
:class:`~reactccl.netsim.reference.FluidEngine` (the reference); only the data layout differs:

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
* the solution is then checked (each flow at or above lam on the re-solved links needs a
  saturated link on which no flow gets more, or its path capacity); a link outside the
  re-solved ones carries no re-solved flow, so its load and top rate are kept from the last
  time they were summed until its version ``lver`` moves (a flow joins or leaves it, or one on
  it changes rate), and a flow outside the set keeps the last such link that was its
  bottleneck (``BLINK`` at version ``BLVER``): the same answers as summing every link afresh;
* the event heap (:mod:`.heap`) is four parallel arrays ordered by (time, kind, id), given in
  any order and heapified first.

Arrays that grow (flows emitted by periodic sources, the heap) are reallocated here and handed
back. The kernel returns a status: 0 done, 1 no events left with watched flows pending,
2 too many events, 3 a periodic source over its backlog (the source in ``si[S_ARG]``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from ..numba_cache import pins_hold
from . import heap, prepare
from .heap import grow, heap_grow, heap_move, heap_pop, heap_push, heapify

# numba checks a cache entry against its own source file only, and the kernel has heap.py and
# prepare.py compiled in: their hashes are pinned here (tests/test_netsim_heap.py checks the
# pins), so an edit there is an edit here; while a pin is off, nothing of this module is cached.
PINNED = {"heap.py": "6969b2cf710cb49b", "prepare.py": "439414c67ee3b7a9"}


_CACHE = pins_hold(Path(__file__).parent, PINNED)
SEND_DONE, ARRIVE, RELEASE, PERIODIC = heap.TRACKED, 1, 2, 3
# integer scalars in ``si``
(S_NFLOWS, S_NPL, S_HSIZE, S_EVENTS, S_BATCHES, S_PENDING, S_MAXEV, S_MAXBL, S_ARG, S_NSTATIC, S_SOLVES, S_SOLVED,
 S_HMAX, S_ROUNDS, S_PASSES, S_FULL, S_CHANGED) = range(17)
NUM_SI = 17
RATE_TOL = 1e-12
MAXMIN_TOL = 1e-12  # = reactccl.netsim.maxmin.REL_TOL
FREEZE_TOL = 1e-9
CHECK_TOL = 1e-11


# columns of the per-flow float array FF and int array FI
REM, RATE, TLAST, LAT, START, SEND_END, END, PATHCAP, NEWRATE = range(9)
PSTART, PLEN, WAITING, VERSION, WATCHED, ORIGIN, FMARK, CHECKED, FRESH, HPOS, BLINK, BLVER = range(12)
NF_COLS, NI_COLS = 9, 12


@njit(cache=_CACHE, error_model="numpy")
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
    if len(unfixed) < len(comp_f):          # grown before the loop: an array assigned in a loop
        unfixed = grow(unfixed, len(comp_f))  # costs numba a reference count per iteration
    nu = 0
    for f in comp_f:
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


@njit(cache=_CACHE)
def _grow_rows(a, n):
    b = np.zeros((max(n, 2 * a.shape[0]), a.shape[1]), a.dtype)
    b[:a.shape[0]] = a
    return b


@njit(cache=_CACHE, inline="always")
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


@njit(cache=_CACHE, inline="always")
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


@njit(cache=_CACHE)
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


@njit(cache=_CACHE, error_model="numpy")
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
    lver, lsv = np.zeros(L, np.int64), np.zeros(L, np.int64)
    lstat, cpass = np.zeros((L, 2)), si[S_PASSES]
    lsum = np.zeros(L)                      # sum of the path capacities of the active flows on each link
    crem, nrem, share = np.zeros(L), np.zeros(L, np.int64), np.zeros(L)
    bott, unfixed = np.zeros(L, np.int8), np.empty(64, np.int64)
    FC = FF.shape[0]
    started, stopped, comp_f = np.empty(FC, np.int64), np.empty(FC, np.int64), np.empty(FC, np.int64)
    seeds, comp_l = np.empty(L, np.int64), np.empty(L, np.int64)
    stack = np.empty(len(child) + len(sent) + len(jkids) + 1, np.int64)
    status = 0
    heapify(ht, hk, hi, hv, FI, HPOS, hsize)
    while si[S_PENDING] > 0:
        if si[S_EVENTS] > si[S_MAXEV]:
            status = 2
            break
        if hsize == 0:
            status = 1
            break
        # the heap has room for the batch: each push in it (an arrival, a periodic source's next
        # emission) follows the pop of the entry it replaces, so it never outgrows its size here
        t = ht[0]
        limit = t + abs(t) * sf[1]
        nst = 0
        nsp = 0
        si[S_BATCHES] += 1
        stamp = si[S_BATCHES]
        while hsize > 0 and ht[0] <= limit:
            k, i, v = hk[0], hi[0], hv[0]
            heap_pop(ht, hk, hi, hv, FI, HPOS, hsize)
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
                heap_push(ht, hk, hi, hv, FI, HPOS, hsize, t + FF[i, LAT], ARRIVE, i, 0)
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
                    started, stopped = grow(started, fid + 1), grow(stopped, fid + 1)
                    comp_f = np.empty(FF.shape[0], np.int64)
                n = per_ptr[i + 1] - per_ptr[i]
                q = si[S_NPL]
                if q + n > len(plinks):
                    plinks, ppos = grow(plinks, q + n), grow(ppos, q + n)
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
                heap_push(ht, hk, hi, hv, FI, HPOS, hsize, t + per_period[i], PERIODIC, i, 0)
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
                lver[l] += 1
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
                lver[l] += 1
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
                    ina = FI[g, FMARK] == stamp
                    r = FF[g, NEWRATE] if ina else FF[g, RATE]
                    ok = r >= FF[g, PATHCAP] * (1.0 - CHECK_TOL)
                    if not ok and not ina:
                        b = FI[g, BLINK] - 1
                        ok = b >= 0 and lin[b] != stamp and FI[g, BLVER] == lver[b]
                    if not ok:
                        p0 = FI[g, PSTART]
                        k = FI[g, PLEN]
                        for h in range(2 * k):         # links outside the re-solved ones first
                            l2 = plinks[p0 + h] if h < k else plinks[p0 + h - k]
                            inl = lin[l2] == stamp
                            if inl != (h >= k) or lcnt[l2] < 2 or lsum[l2] <= cap[l2]:
                                continue
                            if inl:
                                fresh = lchk[l2] != cpass
                                lchk[l2] = cpass
                            else:
                                fresh = lsv[l2] != lver[l2] + 1
                                lsv[l2] = lver[l2] + 1
                            if fresh:
                                tot, top = 0.0, 0.0
                                b2 = lstart[l2]
                                for z in range(lcnt[l2]):
                                    u = lbuf[b2 + z]
                                    x = FF[u, NEWRATE] if FI[u, FMARK] == stamp else FF[u, RATE]
                                    tot += x
                                    if x > top:
                                        top = x
                                lstat[l2, 0], lstat[l2, 1] = tot, top
                            if lstat[l2, 0] >= cap[l2] * (1.0 - CHECK_TOL) and r >= lstat[l2, 1] * (1.0 - CHECK_TOL):
                                ok = True
                                if not ina and not inl:
                                    FI[g, BLINK], FI[g, BLVER] = l2 + 1, lver[l2]
                                break
                    if ok:
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
        if hsize + ncf > len(ht):             # room for a finish entry per flow, before the loop
            ht, hk, hi, hv = heap_grow(ht, hk, hi, hv, hsize + ncf)
        for x in range(ncf):
            f = comp_f[x]
            r = FF[f, NEWRATE]
            old = FF[f, RATE]
            if FI[f, FRESH] != stamp and abs(r - old) <= RATE_TOL * old:
                continue
            si[S_CHANGED] += 1
            left = FF[f, REM] - old * (t - FF[f, TLAST])
            left = left if left > 0.0 else 0.0
            FF[f, REM] = left
            FF[f, RATE] = r
            FF[f, TLAST] = t
            FI[f, VERSION] += 1
            p0 = FI[f, PSTART]
            for h in range(FI[f, PLEN]):
                lver[plinks[p0 + h]] += 1
            if left != np.inf:                # its finish entry moves (no stale entries are left)
                if FI[f, HPOS] >= 0:
                    heap_move(ht, hk, hi, hv, FI, HPOS, FI[f, HPOS], hsize, t + left / r, FI[f, VERSION])
                else:
                    heap_push(ht, hk, hi, hv, FI, HPOS, hsize, t + left / r, SEND_DONE, f, FI[f, VERSION])
                    hsize += 1
    return status, plinks, FF, FI


@njit(cache=_CACHE)
def run_table(cap, tlen, tstart, tlinks, tlat, rows, waiting, release, backlog, child_ptr, child, sent_ptr, sent,
              jwait, jptr, jkids, per_ptr, per_links, per_bits, per_lat, per_period, next_periodic, inflight,
              bits, watched, origin, ht0, hk0, hi0, sf, si):
    """:func:`reactccl.netsim.prepare.prepare` and :func:`run_loop` in one call (a small epoch
    would otherwise pay for boxing and unboxing the nine set-up arrays). Arguments: the flow
    table and rows as ``prepare`` takes them (``backlog`` = ``max_backlog + 1``), then as
    :func:`run_loop`. Returns what :func:`run_loop` returns."""
    plinks, pstart, plen, lat, pathcap, lstart, lbuf, rel_t, rel_f = prepare.prepare(
        cap, tlen, tstart, tlinks, tlat, rows, waiting, release, per_links, backlog)
    return run_loop(cap, child_ptr, child, sent_ptr, sent, jwait, jptr, jkids, per_ptr, per_links, per_bits, per_lat,
                    per_period, next_periodic, inflight, lbuf, lstart, plinks, pstart, plen, lat, pathcap, bits,
                    waiting, watched, origin, rel_t, rel_f, ht0, hk0, hi0, sf, si)

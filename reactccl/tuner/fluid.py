"""A max-min fluid estimate of a pattern's epoch on the links the tuner has learned (numba).

:class:`~reactccl.tuner.estimate.LinkModel` learns, per rank, the extra flows on its send link
(``ps``) and receive link (``pr``), a per-pair fabric factor ``g`` and the line rate ``C``. Its
closed form predicts a flow's FCT from a share count, ``8 b g max(out + ps, in + pr) / C``,
which ignores what max-min fair sharing does with the capacity a flow cannot use: a flow held
back at its sender leaves room at its receiver for the others. :func:`fluid_finish` instead runs
the pattern on a star of those learned links:

* every rank has a send link and a receive link of capacity ``C``; ``ps[r]`` / ``pr[r]`` are
  long-lived background flows of that weight on them (a weight of 0.4 takes 0.4 of a flow's
  share: weighted max-min), so a link with ``k`` job flows and weight ``w`` gives each
  ``C / (k + w)`` when it is their bottleneck;
* a flow of ``b`` bytes carries ``8 b g[s, d]`` bits (the pair's fabric factor as a longer
  flow), starts when its data dependencies and its rank's sends of the previous step in the
  same chunk graph have finished (the executors' step order, as :func:`~.paths.schedule`), and
  runs at its weighted max-min rate (progressive filling, Bertsekas & Gallager §6.5.2), re-solved
  at every start and finish.

Latency is folded into ``C`` as in the closed form. The result is exact for a star whose only
other traffic is long-lived flows into or out of the job's hosts (the oracle's star scenarios:
``tests/test_tuner_fluid.py`` checks hand-computed cases). Source: ours; REACT §5.4.1's
estimator, with the sharing made max-min.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..pattern import CollectivePattern
from .kernels import _send_groups

__all__ = ["fluid_finish"]


@njit(cache=True)
def _rates(active, na, src, dst, N, cap, bg, rate, nun, used, sat):
    """Weighted max-min rates of the ``na`` active flows (``active[:na]``) into ``rate``."""
    L = 2 * N
    for l in range(L):
        nun[l] = 0
        used[l] = 0.0
        sat[l] = False
    for k in range(na):
        f = active[k]
        nun[src[f]] += 1
        nun[N + dst[f]] += 1
        rate[f] = -1.0
    left = na
    while left > 0:
        best, bl = np.inf, -1
        for l in range(L):
            if not sat[l] and nun[l] > 0:
                lam = max(cap - used[l], 0.0) / (nun[l] + bg[l])
                if lam < best:
                    best, bl = lam, l
        if bl < 0:
            break
        for k in range(na):
            f = active[k]
            if rate[f] < 0 and (src[f] == bl or N + dst[f] == bl):
                rate[f] = best
                left -= 1
                for l in (src[f], N + dst[f]):
                    used[l] += best
                    nun[l] -= 1
        sat[bl] = True


@njit(cache=True)
def _simulate(src, dst, bits, ptr, idx, group, prev, num_groups, cap, bg, N):
    F = len(src)
    fin = np.full(F, np.inf)
    # who waits for whom: dependents of each flow, and the groups waiting for each group
    ndep = np.empty(F, np.int64)
    rcount = np.zeros(F + 1, np.int64)
    for f in range(F):
        ndep[f] = ptr[f + 1] - ptr[f]
        for j in range(ptr[f], ptr[f + 1]):
            rcount[idx[j] + 1] += 1
    for f in range(F):
        rcount[f + 1] += rcount[f]
    rdep = np.empty(rcount[F], np.int64)
    fill = rcount[:F].copy()
    for f in range(F):
        for j in range(ptr[f], ptr[f + 1]):
            d = idx[j]
            rdep[fill[d]] = f
            fill[d] += 1
    gleft = np.zeros(num_groups, np.int64)
    for f in range(F):
        gleft[group[f]] += 1
    gcount = np.zeros(num_groups + 1, np.int64)       # members of each group, CSR
    for f in range(F):
        gcount[group[f] + 1] += 1
    for g in range(num_groups):
        gcount[g + 1] += gcount[g]
    gmem = np.empty(F, np.int64)
    gfill = gcount[:num_groups].copy()
    for f in range(F):
        gmem[gfill[group[f]]] = f
        gfill[group[f]] += 1
    nxt = np.full(num_groups, -1, np.int64)           # the group whose prev is g
    for g in range(num_groups):
        if prev[g] >= 0:
            nxt[prev[g]] = g
    started = np.zeros(F, np.bool_)
    rem = bits.copy()
    active = np.empty(F, np.int64)
    na = 0
    # flows that may have become ready, a stack: every flow is pushed once at the start, once per
    # dependency that finishes and once when the group before it completes
    todo = np.empty(2 * F + len(idx), np.int64)
    nt = 0
    for f in range(F):
        todo[nt] = f
        nt += 1
    rate = np.zeros(F)
    nun = np.zeros(2 * N, np.int64)
    used = np.zeros(2 * N)
    sat = np.zeros(2 * N, np.bool_)
    done = np.empty(F, np.int64)
    t = 0.0
    finished = 0
    while finished < F:
        # start what is ready; zero-bit flows finish at once (and may make others ready)
        nd = 0
        while nt > 0:
            nt -= 1
            f = todo[nt]
            if started[f] or ndep[f] > 0:
                continue
            pg = prev[group[f]]
            if pg >= 0 and gleft[pg] > 0:
                continue
            started[f] = True
            if rem[f] <= 0.0:
                done[nd] = f
                nd += 1
            else:
                active[na] = f
                na += 1
        if nd == 0:
            if na == 0:
                return fin                            # nothing runs: a cycle (not a valid pattern)
            _rates(active, na, src, dst, N, cap, bg, rate, nun, used, sat)
            dt = np.inf
            for k in range(na):
                f = active[k]
                if rate[f] > 0:
                    dt = min(dt, rem[f] / rate[f])
            if not np.isfinite(dt):
                return fin
            t += dt
            k = 0
            while k < na:
                f = active[k]
                rem[f] -= rate[f] * dt
                if rem[f] <= 1e-9 * bits[f]:
                    done[nd] = f
                    nd += 1
                    na -= 1
                    active[k] = active[na]
                else:
                    k += 1
        for m in range(nd):
            f = done[m]
            fin[f] = t
            finished += 1
            for j in range(rcount[f], rcount[f + 1]):
                d = rdep[j]
                ndep[d] -= 1
                todo[nt] = d
                nt += 1
            g = group[f]
            gleft[g] -= 1
            if gleft[g] == 0 and nxt[g] >= 0:
                h = nxt[g]
                for j in range(gcount[h], gcount[h + 1]):
                    todo[nt] = gmem[j]
                    nt += 1
    return fin


def fluid_finish(pattern: CollectivePattern, model, flow_bytes: np.ndarray) -> np.ndarray:
    """Finish times (s, shape ``(F,)``) of ``pattern``'s flows on ``model``'s learned links (see
    the module docstring); ``inf`` for flows that never start (a dependency cycle).

    Raises:
        ValueError: ``flow_bytes`` not of shape ``(F,)``, or not finite and >= 0; a line rate
            that is not a positive finite number.
    """
    F = pattern.num_flows
    b = np.asarray(flow_bytes, dtype=np.float64)
    C = float(model.line_rate)
    if b.shape != (F,) or not np.all(np.isfinite(b)) or np.any(b < 0):
        raise ValueError(f"fluid_finish: flow_bytes must be {F} finite values >= 0")
    if not (np.isfinite(C) and C > 0):
        raise ValueError(f"fluid_finish: the model's line rate must be a positive number of bit/s, got {C}")
    if F == 0:
        return np.zeros(0)
    i64 = np.int64
    src, dst, step = (np.asarray(pattern.src, i64), np.asarray(pattern.dst, i64), np.asarray(pattern.step, i64))
    N = pattern.num_ranks
    group, prev = _send_groups(src, np.asarray(pattern.flow_graph, i64), step, int(pattern.flow_graph.max()) + 1,
                               max(pattern.num_steps, 1))
    ptr, idx = pattern.dependencies()
    bits = b * 8.0 * model.pair_factor[src * N + dst]
    bg = np.concatenate([np.asarray(model.ps, np.float64), np.asarray(model.pr, np.float64)])
    return _simulate(src, dst, bits, ptr, idx, group, prev, len(prev), C, bg, N)

"""Compiled kernels (numba, ``cache=True``) of the local search's per-candidate score.

:func:`estimated_finish` returns the flow finish times that
``schedule(pattern, model.predict(pattern, flow_bytes))[0]`` returns
(:class:`~reactccl.tuner.estimate.LinkModel`, :func:`~reactccl.tuner.paths.schedule`), bit for
bit: the same operations on the same float64 values in the same order (step degrees, the
model's shares, one schedule, the schedule's time-averaged concurrency, the refined shares, the
final schedule), in one call instead of ~60 numpy calls and two Python loops over the flows.
The numpy code stays the reference; ``tests/test_tuner_kernels.py`` compares the two exactly
on random patterns and models.

Why: :func:`~reactccl.tuner.steepest.local_search` scores hundreds of candidate patterns per
decision; on the 8-rank patterns of the REACT figures numpy's per-call overhead, not the
arithmetic, was 60% of the search (issue 12: ``experiment fig5a`` spent 95% of its time there).
Source: ours.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..pattern import CollectivePattern

__all__ = ["estimated_finish", "send_group_arrays", "swap_endpoints"]


@njit(cache=True)
def _lex3(g, t, neg):
    """``np.lexsort((neg, t, g))``: stable sorts from the least significant key up."""
    o1 = np.argsort(neg, kind="mergesort")
    o2 = o1[np.argsort(t[o1], kind="mergesort")]
    return o2[np.argsort(g[o2], kind="mergesort")]


@njit(cache=True)
def _mean_concurrency(group, start, end):
    """:func:`reactccl.tuner.estimate.mean_concurrency`, the same operations in the same order."""
    F = len(group)
    out = np.ones(F)
    if F == 0:
        return out
    g = np.empty(2 * F, np.int64)
    t = np.empty(2 * F)
    neg = np.empty(2 * F)               # -delta: a start (+1) sorts before an end at equal times
    for f in range(F):
        g[f] = group[f]
        g[F + f] = group[f]
        t[f] = start[f]
        t[F + f] = end[f]
        neg[f] = -1.0
        neg[F + f] = 1.0
    order = _lex3(g, t, neg)
    integral = np.empty(2 * F)
    integral[0] = 0.0
    count = 0.0
    for k in range(1, 2 * F):
        count += -neg[order[k - 1]]
        integral[k] = integral[k - 1] + count * (t[order[k]] - t[order[k - 1]])
    pos = np.empty(2 * F, np.int64)
    for k in range(2 * F):
        pos[order[k]] = k
    for f in range(F):
        dur = end[f] - start[f]
        if dur > 0:
            out[f] = (integral[pos[F + f]] - integral[pos[f]]) / dur
    return out


@njit(cache=True)
def _schedule(order, ptr, idx, w, group, prev, num_groups):
    """The step-order loop of :func:`reactccl.tuner.paths.schedule` (finish times only)."""
    F = len(w)
    fin = np.zeros(F)
    gfin = np.zeros(num_groups)
    glast = np.full(num_groups, -1, np.int64)
    for k in range(F):
        f = order[k]
        st, p = 0.0, -1
        for j in range(ptr[f], ptr[f + 1]):
            d = idx[j]
            if p < 0 or fin[d] > st:
                st, p = fin[d], d
        g = group[f]
        pg = prev[g]
        if pg >= 0 and gfin[pg] > st:
            st = gfin[pg]
        e = st + w[f]
        fin[f] = e
        if glast[g] < 0 or e > gfin[g]:
            gfin[g], glast[g] = e, f
    return fin


@njit(cache=True)
def _shares(src, dst, oc, ic, pair_factor, ps, pr, N):
    F = len(src)
    n = np.empty(F)
    for f in range(F):
        s, d = src[f], dst[f]
        n[f] = pair_factor[s * N + d] * max(oc[f] + ps[s], ic[f] + pr[d])
    return n


@njit(cache=True)
def _finish(src, dst, step, order, ptr, idx, group, prev, num_groups, nbytes, pair_factor, ps, pr,
            line_rate, N, T, refine):
    F = len(src)
    deg_out = np.zeros(T * N, np.int64)
    deg_in = np.zeros(T * N, np.int64)
    for f in range(F):
        deg_out[step[f] * N + src[f]] += 1
        deg_in[step[f] * N + dst[f]] += 1
    o = np.empty(F)
    i = np.empty(F)
    for f in range(F):
        o[f] = deg_out[step[f] * N + src[f]]
        i[f] = deg_in[step[f] * N + dst[f]]
    n = _shares(src, dst, o, i, pair_factor, ps, pr, N)
    if refine:
        w = np.empty(F)
        for f in range(F):
            w[f] = nbytes[f] * 8.0 * n[f] / line_rate
        fin = _schedule(order, ptr, idx, w, group, prev, num_groups)
        start = fin - w
        n = _shares(src, dst, _mean_concurrency(src, start, fin), _mean_concurrency(dst, start, fin),
                    pair_factor, ps, pr, N)
    w = np.empty(F)
    for f in range(F):
        w[f] = nbytes[f] * 8.0 * n[f] / line_rate
    return _schedule(order, ptr, idx, w, group, prev, num_groups)


@njit(cache=True)
def _send_groups(src, fgraph, step, G, T):
    """Group id and previous group of every flow's (source, chunk graph, step), numbered as
    ``np.unique`` numbers the keys (see :func:`reactccl.pattern.order.send_groups`)."""
    F = len(src)
    key = np.empty(F, np.int64)
    for f in range(F):
        key[f] = (src[f] * G + fgraph[f]) * T + step[f]
    order = np.argsort(key, kind="mergesort")
    group = np.empty(F, np.int64)
    prev = np.empty(F, np.int64)
    g = -1
    for k in range(F):
        f = order[k]
        if k == 0 or key[f] != key[order[k - 1]]:
            g += 1
            same_lane = k > 0 and key[f] // T == key[order[k - 1]] // T
            prev[g] = g - 1 if same_lane else -1
        group[f] = g
    return group, prev[:g + 1].copy()


def send_group_arrays(pattern: CollectivePattern) -> tuple[np.ndarray, np.ndarray]:
    """``(group (F,), prev (G,))`` of :func:`reactccl.pattern.order.send_groups`, compiled."""
    G_ = int(pattern.chunk_graph.max()) + 1
    T = max(pattern.num_steps, 1)
    return _send_groups(np.asarray(pattern.src, np.int64), np.asarray(pattern.flow_graph, np.int64),
                        np.asarray(pattern.step, np.int64), G_, T)


@njit(cache=True)
def _estimated_finish(src, dst, step, fgraph, ptr, idx, nbytes, pair_factor, ps, pr, line_rate, N, refine):
    """Send groups, step order and :func:`_finish` in one call; an empty array when a byte count
    is not finite and >= 0 (the reference raises there)."""
    F = len(src)
    for f in range(F):
        if not (nbytes[f] >= 0 and np.isfinite(nbytes[f])):
            return np.empty(0)
    T = max(step.max() + 1, 1)
    group, prev = _send_groups(src, fgraph, step, fgraph.max() + 1, T)
    order = np.argsort(step, kind="mergesort")
    return _finish(src, dst, step, order, ptr, idx, group, prev, len(prev), nbytes, pair_factor, ps, pr,
                   line_rate, N, T, refine)


def estimated_finish(pattern: CollectivePattern, model, flow_bytes: np.ndarray) -> np.ndarray | None:
    """Finish times (s, shape ``(F,)``) of ``pattern``'s flows as
    ``schedule(pattern, model.predict(pattern, flow_bytes))[0]`` gives them (module docstring),
    or None where that reference path must run instead (no flows, a line rate that is not a
    positive finite number, or bytes that are not finite and >= 0: the reference raises there).
    """
    F = pattern.num_flows
    b = np.asarray(flow_bytes, dtype=np.float64)
    C = float(model.line_rate)
    if F == 0 or b.shape != (F,) or not (np.isfinite(C) and C > 0):
        return None
    i64 = np.int64
    ptr, idx = pattern.dependencies()
    fin = _estimated_finish(np.asarray(pattern.src, i64), np.asarray(pattern.dst, i64), np.asarray(pattern.step, i64),
                            np.asarray(pattern.flow_graph, i64), ptr, idx, b, model.pair_factor, model.ps, model.pr,
                            C, pattern.num_ranks, model.concurrency != "step")
    return fin if len(fin) == F else None


@njit(cache=True)
def _swap_endpoints(src, dst, fgraph, step, a, b, graph, t0, t1):
    """Endpoints with ranks ``a`` and ``b`` exchanged in the flows touching either, restricted
    to chunk graph ``graph`` (when >= 0) and steps ``t0..t1`` (when ``t0 >= 0``)."""
    ns = src.copy()
    nd = dst.copy()
    for f in range(len(src)):
        s, d = src[f], dst[f]
        if s != a and s != b and d != a and d != b:
            continue
        if graph >= 0 and fgraph[f] != graph or t0 >= 0 and not t0 <= step[f] <= t1:
            continue
        ns[f] = b if s == a else a if s == b else s
        nd[f] = b if d == a else a if d == b else d
    return ns, nd


def swap_endpoints(src: np.ndarray, dst: np.ndarray, fgraph: np.ndarray, step: np.ndarray, a: int, b: int,
                   graph: int | None, t0: int | None, t1: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` after exchanging ranks ``a`` and ``b`` in the flows a swap selects
    (:meth:`reactccl.tuner.transforms.Swap.mask`: those touching ``a`` or ``b``, of chunk graph
    ``graph`` and steps ``t0..t1`` where given), new int64 arrays of shape ``(F,)``; what
    ``np.where(mask, sig[src], src)`` gives for the transposition ``sig``, in one call."""
    return _swap_endpoints(src, dst, fgraph, step, a, b, -1 if graph is None else graph,
                           -1 if t0 is None else t0, -1 if t1 is None else t1)

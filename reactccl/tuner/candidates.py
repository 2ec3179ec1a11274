"""Scoring the local search's candidates from their endpoint arrays alone.

A candidate of :func:`~reactccl.tuner.steepest.local_search` differs from the current pattern only
in its flows' endpoints (``src``, ``dst``) where the collective has no root and no blocks to move
(allreduce). :class:`CandidateScorer` then scores it without building a
:class:`~reactccl.pattern.CollectivePattern`. It calls the compiled kernels that the pattern's
own methods call (verify's accept path on the stale chunk graph, the dependency lists, the
estimate) on arrays prepared once per search, and returns what building the pattern and calling
``verify`` and ``_estimate`` on it returns, in the same floating-point operations
(:func:`_score_kernel`). It works a block of moves at a time: one compiled call makes every
move's endpoints (:meth:`CandidateScorer.apply_moves`, what ``Placement.apply`` makes), the
search drops the placements it has seen (by the same keys as ``Placement.key``), and one more
call scores the rest (:meth:`CandidateScorer.score_rows`), so a candidate costs no Python
object until it is the best one. Where it cannot decide (a self-flow, more than 128 chunk
graphs), it answers :data:`PATTERN_PATH` and the search builds and scores the pattern; a
candidate verify's kernel rejects is answered :data:`REJECT` and skipped, without running the
reference count a second time for a message nobody reads. ``tests/test_tuner_kernels.py``
compares the two paths on whole REACT runs. Source: ours.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from ..numba_cache import pins_hold
from ..pattern import Collective, CollectivePattern
from ..pattern.deps import _deps
from ..pattern.verify import DEFAULT_MAX_BYTES, chunk_owner, verify_bytes
from ..pattern.verify_fast import MAX_RANKS, _accepts
from .estimate import LinkModel
from .fluid import _simulate
from .kernels import _estimated_finish, _send_groups, _swap_endpoints
from .transforms import Swap

__all__ = ["CandidateScorer", "SCORED", "PATTERN_PATH", "REJECT", "MOVE_BLOCK"]


# numba checks a cache entry against its own source file only, and _score_kernel has the kernels of
# these files compiled in: their hashes are pinned (tests/test_tuner_kernels.py checks the pins), so
# an edit there is an edit here; while a pin is off, the kernel is compiled afresh in each process
PINNED = {"pattern/verify_fast.py": "63137b0e38ac7ec7", "pattern/deps.py": "6b58cb19f2a0a484",
          "tuner/fluid.py": "03480213e0cf1049", "tuner/kernels.py": "3313bfffb7de3840"}
_CACHE = pins_hold(Path(__file__).parent.parent, PINNED)

# what _score_kernel found: a score; the pattern path must decide; the candidate does not verify
# (the search skips it: it needs no message; the kernel is checked against the reference in the
# verify tests)
_SCORED, _PATTERN_PATH, _REJECT = 0, 1, 2
SCORED, PATTERN_PATH, REJECT = _SCORED, _PATTERN_PATH, _REJECT

#: candidate endpoint arrays made per compiled call (:meth:`CandidateScorer.apply_moves`), about
#: 16 MB of int64 rows: a block of ``max(1, MOVE_BLOCK // F)`` moves
MOVE_BLOCK = 1 << 20


@njit(cache=_CACHE)
def _pairwise_sum(a):
    """``np.add.reduce(a)`` for ``len(a) <= 128``, bit for bit: numpy's pairwise summation (a
    plain loop below 8 values, eight running sums up to its 128-value block)."""
    n = len(a)
    if n < 8:
        res = -0.0
        for i in range(n):
            res += a[i]
        return res
    r = a[:8].copy()
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] += a[i + j]
        i += 8
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    while i < n:
        res += a[i]
        i += 1
    return res


@njit(cache=_CACHE)
def _score_kernel(src, dst, check, dep_ptr, dep_idx, have_deps, N, C, owner, pf, ch, step, op, want, st, T,
                  fg, G, b, pair_factor, ps, pr, bg, line_rate, fluid, refine):
    """One candidate, every stage of scoring it from its endpoints in one compiled call:
    ``(status, epoch s, score s)``, status ``_SCORED``, ``_PATTERN_PATH`` (a self-flow, a byte
    count the reference refuses, or more than 128 chunk graphs) or ``_REJECT`` (verify's kernel
    rejects it)."""
    F = len(src)
    for f in range(F):
        if src[f] == dst[f]:
            return _PATTERN_PATH, 0.0, 0.0
    if G > 128:
        return _PATTERN_PATH, 0.0, 0.0
    if check and not _accepts(N, C, 0, 0, 0, owner, owner, pf, ch, step, src, dst, op, want):
        return _REJECT, 0.0, 0.0
    if have_deps:
        ptr, idx = dep_ptr, dep_idx
    else:
        P = len(pf)
        rpos = np.empty(P, np.int64)
        spos = np.empty(P, np.int64)
        for k in range(P):
            rpos[k] = dst[pf[k]] * C + ch[k]
            spos[k] = src[pf[k]] * C + ch[k]
        ptr, idx = _deps(F, pf, rpos, spos, st, T)
    if fluid:
        group, prev = _send_groups(src, fg, step, G, T)
        bits = np.empty(F)
        for f in range(F):
            bits[f] = b[f] * 8.0 * pair_factor[src[f] * N + dst[f]]
        finish = _simulate(src, dst, bits, ptr, idx, group, prev, len(prev), line_rate, bg, N)
    else:
        finish = _estimated_finish(src, dst, step, fg, ptr, idx, b, pair_factor, ps, pr, line_rate, N, refine)
        if len(finish) != F:
            return _PATTERN_PATH, 0.0, 0.0
    # np.maximum.at(gmax, fg, finish); finish.max(); gmax[gmax > 0].mean(), NaN-propagating alike
    gmax = np.zeros(G)
    t = finish[0]
    for f in range(F):
        v, cur = finish[f], gmax[fg[f]]
        if cur == cur and (v != v or v > cur):
            gmax[fg[f]] = v
        if t == t and (v != v or v > t):
            t = v
    pos = gmax[gmax > 0]
    mean = _pairwise_sum(pos) / len(pos) if len(pos) else np.nan    # numpy: nan for an empty mean
    return _SCORED, t, t + 0.01 * mean


@njit(cache=_CACHE)
def _apply_moves(src, dst, kappa, fg, step, kind, a, b, graph, t0, t1):
    """Every move's endpoints and kappa, as :meth:`~reactccl.tuner.transforms.Placement.apply`
    makes them (a ① swap relabels by the transposition, others by :func:`_swap_endpoints` on the
    original chunk graphs): shapes ``(K, F)``, ``(K, F)``, ``(K, N)``."""
    K, F, N = len(kind), len(src), len(kappa)
    S = np.empty((K, F), np.int64)
    D = np.empty((K, F), np.int64)
    P = np.empty((K, N), np.int64)
    for k in range(K):
        x, y = a[k], b[k]
        if kind[k] == 1:
            for f in range(F):
                s, d = src[f], dst[f]
                S[k, f] = y if s == x else x if s == y else s
                D[k, f] = y if d == x else x if d == y else d
            for r in range(N):
                v = kappa[r]
                P[k, r] = y if v == x else x if v == y else v
        else:
            ns, nd = _swap_endpoints(src, dst, fg, step, x, y, graph[k], t0[k], t1[k])
            S[k] = ns
            D[k] = nd
            P[k] = kappa
    return S, D, P


@njit(cache=_CACHE)
def _score_many(S, D, rows, vgraph, use_deps, dep_ptr, dep_idx, N, C, owner, pf, ch, step, op, chunk_graph, st,
                T, fg, G, b, pair_factor, ps, pr, bg, line_rate, fluid, refine):
    """:func:`_score_kernel` of the candidates ``S[rows[j]]``, ``D[rows[j]]``: verify chunk graph
    ``vgraph[j]`` first where it is >= 0 (-2: left to the pattern path, not scored), with the given
    dependency lists where ``use_deps[j]``; ``(status, epoch s, score s)`` per candidate, shape
    ``(M,)`` each."""
    M = len(rows)
    status = np.empty(M, np.int64)
    est = np.empty(M)
    val = np.empty(M)
    none = np.zeros(len(chunk_graph), np.bool_)
    for j in range(M):
        k = rows[j]
        if vgraph[j] == -2:
            status[j], est[j], val[j] = _PATTERN_PATH, 0.0, 0.0
            continue
        check = vgraph[j] >= 0
        want = chunk_graph == vgraph[j] if check else none
        status[j], est[j], val[j] = _score_kernel(S[k], D[k], check, dep_ptr, dep_idx, use_deps[j], N, C, owner, pf,
                                                  ch, step, op, want, st, T, fg, G, b, pair_factor, ps, pr, bg,
                                                  line_rate, fluid, refine)
    return status, est, val


class CandidateScorer:
    """Scores relabellings of ``pattern`` from their endpoint arrays (see the module docstring):
    :meth:`apply_moves` makes a block of candidates, :meth:`score_rows` scores them;
    :attr:`usable` says whether it applies at all.

    Args:
        pattern: the search's current pattern (a candidate shares all but its endpoints).
        model: a :class:`LinkModel` (any other model: not usable).
        flow_bytes: bytes per flow, shape ``(F,)``.
        estimator: ``"closed"`` or ``"fluid"``.
    """

    def __init__(self, pattern: CollectivePattern, model, flow_bytes: np.ndarray, estimator: str) -> None:
        p = pattern
        b = np.asarray(flow_bytes, dtype=np.float64)
        F = p.num_flows
        P = len(p.chunk_idx)
        self.usable = (type(model) is LinkModel and estimator in ("closed", "fluid") and F > 0
                       and p.collective is Collective.ALLREDUCE and b.shape == (F,)
                       and bool(np.all(np.isfinite(b)) and np.all(b >= 0))
                       and np.isfinite(model.line_rate) and model.line_rate > 0
                       and p.num_ranks * p.num_chunks * p.num_steps < 1 << 62)     # deps.py's compiled case
        # verify refuses patterns whose count would not fit its memory limit: leave those to it
        self.verify_fits = verify_bytes(p.num_ranks, p.num_chunks, P, P, p.collective) <= DEFAULT_MAX_BYTES
        if not self.usable:
            return
        i64 = np.int64
        self.p, self.model, self.b, self.fluid = p, model, b, estimator == "fluid"
        self.N, self.C, self.T = p.num_ranks, p.num_chunks, max(p.num_steps, 1)
        self.step = np.asarray(p.step, i64)
        self.fg = np.asarray(p.flow_graph, i64)
        self.G = int(self.fg.max()) + 1
        self.pf = np.asarray(p.pair_flow, i64)
        self.ch = np.asarray(p.chunk_idx, i64)
        self.st = self.step[self.pf]
        self.op = np.asarray(p.op, i64)
        self.owner = np.asarray(chunk_owner(p), i64)
        self.chunk_graph = np.asarray(p.chunk_graph, i64)
        self.bg = np.concatenate([np.asarray(model.ps, np.float64), np.asarray(model.pr, np.float64)])
        self.refine = model.concurrency != "step"
        self.no_deps = (np.zeros(1, i64), np.zeros(0, i64))

    def apply_moves(self, src: np.ndarray, dst: np.ndarray, kappa: np.ndarray,
                    moves: list[Swap]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Endpoints and kappa after each of ``moves`` from the placement ``(src, dst, kappa)``
        (the search's current one), shapes ``(K, F)``, ``(K, F)``, ``(K, N)``: what
        ``Placement.apply`` gives for each move, in one compiled call."""
        K = len(moves)
        kind = np.empty(K, np.int64)
        ab = np.empty((5, K), np.int64)
        for k, sw in enumerate(moves):
            kind[k] = int(sw.kind)
            ab[0, k], ab[1, k] = sw.a, sw.b
            ab[2, k] = -1 if sw.graph is None else sw.graph
            ab[3, k] = -1 if sw.t0 is None else sw.t0
            ab[4, k] = -1 if sw.t1 is None else sw.t1
        return _apply_moves(src, dst, kappa, self.fg, self.step, kind, ab[0], ab[1], ab[2], ab[3], ab[4])

    def score_rows(self, S: np.ndarray, D: np.ndarray, rows: list[int], verify_graphs: list[int],
                   deps: tuple[np.ndarray, np.ndarray] | None, use_deps: list[bool]) -> tuple[np.ndarray, ...]:
        """The candidates ``S[rows[j]], D[rows[j]]`` scored in one compiled call: ``(status,
        estimate s, score s)`` per candidate, shape ``(M,)`` each. Status :data:`SCORED`: what
        building its pattern and scoring it gives (``local._estimate``); :data:`REJECT`: it does
        not verify; :data:`PATTERN_PATH`: the pattern path must decide (a self-flow, more than 128
        chunk graphs, or a graph to verify beyond verify's kernel: more than ``MAX_RANKS`` ranks
        or its memory limit).

        Args:
            verify_graphs: per candidate, the chunk graph to verify first (its viable set is
                stale), or -1.
            deps: the current pattern's dependency lists (a ① candidate keeps them), or None;
                ``use_deps[j]``: whether candidate ``j`` uses them.
        """
        M = len(rows)
        vg = np.asarray(verify_graphs, np.int64).reshape(M)
        if self.N > MAX_RANKS or not self.verify_fits:     # verify's kernel cannot decide: the pattern path does
            vg[vg >= 0] = -2
        if deps is None:
            ptr, idx, use = self.no_deps[0], self.no_deps[1], np.zeros(M, np.bool_)
        else:
            ptr, idx = np.ascontiguousarray(deps[0], np.int64), np.ascontiguousarray(deps[1], np.int64)
            use = np.asarray(use_deps, np.bool_).reshape(M)
        m = self.model
        return _score_many(S, D, np.asarray(rows, np.int64).reshape(M), vg, use, ptr, idx, self.N, self.C, self.owner,
                           self.pf, self.ch, self.step, self.op, self.chunk_graph, self.st, self.T, self.fg, self.G,
                           self.b, m.pair_factor, m.ps, m.pr, self.bg, float(m.line_rate), self.fluid, self.refine)

"""Scoring the local search's candidates from their endpoint arrays alone.

A candidate of :func:`~reactccl.tuner.local.local_search` differs from the current pattern only
in its flows' endpoints (``src``, ``dst``) where the collective has no root and no blocks to move
(allreduce). :class:`CandidateScorer` then scores it without building a
:class:`~reactccl.pattern.CollectivePattern`. It calls the compiled kernels that the pattern's
own methods call (verify's accept path on the stale chunk graph, the dependency lists, the
estimate) on arrays prepared once per search. It returns what building the pattern and calling
``verify`` and ``_estimate`` on it returns, in the same floating-point operations, in one
compiled call per candidate (:func:`_score_kernel`). Where it cannot decide (a self-flow, more
than 128 chunk graphs), it answers None and the search takes the pattern path; a candidate
verify's kernel rejects is answered :data:`REJECTED` and skipped, without running the reference
count a second time for a message nobody reads. ``tests/test_tuner_kernels.py`` compares the two
on whole REACT runs. Source: ours.
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
from .kernels import _estimated_finish, _send_groups

__all__ = ["CandidateScorer", "REJECTED"]

#: :meth:`CandidateScorer.score`'s answer for a candidate that does not verify: the search skips
#: it (it needs no message; the kernel is checked against the reference in the verify tests)
REJECTED = (float("inf"), float("inf"))

# numba checks a cache entry against its own source file only, and _score_kernel has the kernels of
# these files compiled in: their hashes are pinned (tests/test_tuner_kernels.py checks the pins), so
# an edit there is an edit here; while a pin is off, the kernel is compiled afresh in each process
PINNED = {"pattern/verify_fast.py": "998093800d5d8183", "pattern/deps.py": "2ad8177bd050d173",
          "tuner/fluid.py": "03480213e0cf1049", "tuner/kernels.py": "f3bf52dd9a9f0f0d"}
_CACHE = pins_hold(Path(__file__).parent.parent, PINNED)

# what _score_kernel found besides a score
_SCORED, _PATTERN_PATH, _REJECT = 0, 1, 2


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
    """One candidate, every stage of :meth:`CandidateScorer.score` in one compiled call:
    ``(status, epoch s, score s)``, status ``_SCORED``, ``_PATTERN_PATH`` (a self-flow, a byte
    count the reference refuses, or more than 128 chunk graphs) or ``_REJECT`` (verify's kernel
    rejects it)."""
    F = len(src)
    for f in range(F):
        if src[f] == dst[f]:
            return _PATTERN_PATH, 0.0, 0.0
    if G > 128:
        return _PATTERN_PATH, 0.0, 0.0
    if check and not _accepts(N, C, 0, 0, 0, owner, pf, ch, step, src, dst, op, want):
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


class CandidateScorer:
    """``score(src, dst, graph, deps) -> (estimate s, search score s) | None`` for relabellings of
    ``pattern`` (see the module docstring); :attr:`usable` says whether it applies at all.

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
        self.no_graph = np.zeros(len(self.chunk_graph), np.bool_)
        self.no_deps = (np.zeros(1, i64), np.zeros(0, i64))

    def score(self, src: np.ndarray, dst: np.ndarray, verify_graph: int | None,
              deps: tuple[np.ndarray, np.ndarray] | None) -> tuple[float, float] | None:
        """The candidate's ``(estimated epoch, search score)`` in s, :data:`REJECTED` when it
        does not verify, or None where the pattern path must decide (it is then built, verified
        and scored as before).

        Args:
            src, dst: the candidate's endpoints, shape ``(F,)``, int64.
            verify_graph: verify this chunk graph first (its viable set is stale), or None.
            deps: the candidate's dependency lists when known (a ① swap keeps them), else None.
        """
        if verify_graph is not None and (self.N > MAX_RANKS or not self.verify_fits):
            return None
        check = verify_graph is not None
        want = self.chunk_graph == verify_graph if check else self.no_graph
        have = deps is not None
        ptr, idx = (np.ascontiguousarray(deps[0], np.int64), np.ascontiguousarray(deps[1], np.int64)) if have \
            else self.no_deps
        m = self.model
        status, t, v = _score_kernel(src, dst, check, ptr, idx, have, self.N, self.C, self.owner, self.pf, self.ch,
                                     self.step, self.op, want, self.st, self.T, self.fg, self.G, self.b,
                                     m.pair_factor, m.ps, m.pr, self.bg, float(m.line_rate), self.fluid, self.refine)
        if status == _SCORED:
            return t, v
        return REJECTED if status == _REJECT else None

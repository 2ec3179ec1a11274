"""Scoring the local search's candidates from their endpoint arrays alone.

A candidate of :func:`~reactccl.tuner.local.local_search` differs from the current pattern only
in its flows' endpoints (``src``, ``dst``) where the collective has no root and no blocks to move
(allreduce). :class:`CandidateScorer` then scores it without building a
:class:`~reactccl.pattern.CollectivePattern`. It calls the compiled kernels that the pattern's
own methods call (verify's accept path on the stale chunk graph, the dependency lists, the
estimate) on arrays prepared once per search. It returns what building the pattern and calling
``verify`` and ``_estimate`` on it returns, in the same floating-point operations. Where it
cannot decide (a self-flow), it answers None and the search takes the pattern path; a
candidate verify's kernel rejects is answered :data:`REJECTED` and skipped, without running
the reference count a second time for a message nobody reads. ``tests/test_tuner_kernels.py`` compares the two on
whole REACT runs. Source: ours.
"""

from __future__ import annotations

import numpy as np

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
        if bool(np.any(src == dst)) or verify_graph is not None and (self.N > MAX_RANKS or not self.verify_fits):
            return None
        if verify_graph is not None:
            want = self.chunk_graph == verify_graph
            if not _accepts(self.N, self.C, 0, 0, 0, self.owner, self.pf, self.ch, self.step, src, dst, self.op,
                            want):
                return REJECTED
        C = self.C
        ptr, idx = deps if deps is not None else _deps(len(src), self.pf, dst[self.pf] * C + self.ch,
                                                       src[self.pf] * C + self.ch, self.st, self.T)
        m = self.model
        if self.fluid:
            group, prev = _send_groups(src, self.fg, self.step, self.G, self.T)
            bits = self.b * 8.0 * m.pair_factor[src * self.N + dst]
            finish = _simulate(src, dst, bits, ptr, idx, group, prev, len(prev), float(m.line_rate), self.bg, self.N)
        else:
            finish = _estimated_finish(src, dst, self.step, self.fg, ptr, idx, self.b, m.pair_factor, m.ps, m.pr,
                                       float(m.line_rate), self.N, self.refine)
            if len(finish) != len(src):
                return None
        gmax = np.zeros(self.G)
        np.maximum.at(gmax, self.fg, finish)
        t = float(finish.max())
        return t, t + 0.01 * float(gmax[gmax > 0].mean())

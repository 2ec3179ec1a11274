"""Local search over REACT's move set for the best estimated whole-epoch time (§5.3, §5.4.1).

Where Algorithm 1 (:mod:`.greedy`) accepts one greedy swap per congested node against the old
critical paths, :func:`local_search` walks the placement space: at each step it scores every
candidate move that touches a rank on the current *estimated* critical path — ③ window swaps and
② chunk swaps from the exact viable sets, ① global swaps with the least loaded partners — by the
estimated epoch time of the whole pattern (longest dependency chain with
:class:`~reactccl.tuner.estimate.LinkModel` FCTs; plus 1% of the chunk graphs' mean finish time
to break the plateau of equally critical graphs), and takes the best one (steepest descent),
until no move improves, ``max_moves`` moves are made or ``max_evals`` candidates are scored.

Pruning: only ranks on the estimated critical path are moved, hottest first (largest
estimated share count beyond the pattern's own degree), at most ``hot`` of them per step; on
large patterns only windows holding the rank's steps on the path (REACT's "position on the
critical path"); ① partners are the ``partners`` ranks with the least extra load on their links. Moves in ``banned``
and placements whose key is in ``banned_keys`` (trials that measured a loss) are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..pattern import CollectivePattern, PatternError, verify
from .estimate import LinkModel, step_degrees
from .candidates import MOVE_BLOCK, REJECT, SCORED, CandidateScorer
from .fluid import fluid_finish
from .kernels import estimated_finish
from .paths import critical_path, schedule
from .transforms import Placement, Swap, Transform, TunerError, ViableSwaps

__all__ = ["LocalResult", "local_search", "estimated_epoch"]

#: score candidates from their endpoint arrays where that gives the same answer (candidates.py);
#: False builds every candidate pattern (the reference path, for tests)
ENDPOINT_SCORING = True


ESTIMATORS = ("closed", "fluid")


def estimated_epoch(pattern: CollectivePattern, model: LinkModel, flow_bytes: np.ndarray,
                    estimator: str = "closed") -> float:
    """Estimated epoch time (s) of ``pattern``: ``"closed"``, the longest dependency chain with
    the model's predicted FCTs; ``"fluid"``, max-min sharing on the learned links
    (:mod:`.fluid`)."""
    return _estimate(pattern, model, flow_bytes, estimator)[0]


def _estimate(pattern: CollectivePattern, model: LinkModel, flow_bytes: np.ndarray,
              estimator: str = "closed") -> tuple[float, float]:
    """(estimated epoch time, search score) in s. The score adds 1% of the mean finish time of the
    chunk graphs: when two graphs are equally critical (the two trees of a double binary tree),
    a move that speeds up one of them lowers the score, so the search can cross the plateau to
    the move that speeds up the other."""
    if not pattern.num_flows:
        return 0.0, 0.0
    if estimator == "fluid":
        finish = fluid_finish(pattern, model, flow_bytes)
    elif estimator != "closed":
        raise ValueError(f"estimator: expected one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    else:
        finish = estimated_finish(pattern, model, flow_bytes) if type(model) is LinkModel else None
    if finish is None:  # the reference path (and its errors); any other model's own predict
        finish = schedule(pattern, model.predict(pattern, flow_bytes))[0]
    g = pattern.flow_graph
    gmax = np.zeros(int(g.max()) + 1)
    np.maximum.at(gmax, g, finish)
    t = float(finish.max())
    return t, t + 0.01 * float(gmax[gmax > 0].mean())


@dataclass
class LocalResult:
    """Outcome of :func:`local_search`: the moves taken in order with the estimated epoch time
    (s) after each, the final placement, the estimate before and after, and candidates scored."""

    placement: Placement
    moves: list[Swap] = field(default_factory=list)
    estimates: list[float] = field(default_factory=list)
    est_before: float = 0.0
    est_after: float = 0.0
    evals: int = 0

    @property
    def gain(self) -> float:
        """est_before / est_after (> 1: estimated faster)."""
        return self.est_before / self.est_after if self.est_after > 0 else 1.0


def graph_chunks(pattern: CollectivePattern, g: int) -> np.ndarray:
    """Chunk ids of chunk graph ``g``, shape ``(k,)``."""
    return np.flatnonzero(pattern.chunk_graph == g)


def _hot_ranks(pattern: CollectivePattern, model: LinkModel, flow_bytes: np.ndarray,
               limit: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """Ranks on the estimated critical path, hottest first (see the module docstring), each with
    its (chunk graph, step) positions on the path."""
    w = model.predict(pattern, flow_bytes)
    path = critical_path(pattern, w).flows
    if not path.size:
        return []
    o, i = step_degrees(pattern)
    s, d = pattern.src[path], pattern.dst[path]
    g = model.pair_factor[s * model.num_ranks + d]
    # blame: a sender's heat is its send link's load over the flow's own sharing, a receiver's
    # its receive link's; the pair's fabric factor counts for both
    base = np.maximum(o[path], i[path])
    blame = (g * (o[path] + model.ps[s]) / base, g * (i[path] + model.pr[d]) / base)
    heat: dict[int, float] = {}
    where: dict[int, list[tuple[int, int]]] = {}
    for k, f in enumerate(path.tolist()):
        for r, e in ((int(s[k]), float(blame[0][k])), (int(d[k]), float(blame[1][k]))):
            heat[r] = max(heat.get(r, 0.0), e + w[f] * 1e-12)
            where.setdefault(r, []).append((int(pattern.flow_graph[f]), int(pattern.step[f])))
    return [(r, where[r]) for r in sorted(heat, key=lambda r: (-heat[r], r))[:limit]]


def _moves(placement: Placement, pattern: CollectivePattern, viable: ViableSwaps, model: LinkModel,
           ranks: list[tuple[int, list[tuple[int, int]]]], partners: int, all_windows: bool,
           cap: int | None = None, rng: np.random.Generator | None = None) -> list[Swap]:
    """Candidate moves of the hot ranks: ③/② windows of the rank in the chunk graphs where it is on
    the path (all its windows there when ``all_windows``, else those holding one of its path
    steps), then ① swaps with the least loaded partners; at most ``cap`` per rank (a seeded
    random sample of its windows, the ① swaps always kept)."""
    out: list[Swap] = []
    seen: set[Swap] = set()
    N = pattern.num_ranks
    load = model.ps + model.pr
    cool = sorted(range(N), key=lambda r: (load[r], r))
    sets: dict[int, tuple] = {}     # per graph: its viable set and the set's columns as lists
    for r, spots in ranks:
        mine: list[Swap] = []
        for g, t in (sorted({(g, -1) for g, _ in spots}) if all_windows else spots):
            if g not in sets:
                s = viable.for_graph(placement, g)
                sets[g] = (s, s.a.tolist(), s.b.tolist(), s.full.tolist(), s.t0.tolist(), s.t1.tolist())
            s, a_, b_, full_, t0_, t1_ = sets[g]
            for k in s.select(graph=g, rank=r, step=None if t < 0 else t).tolist():
                y = b_[k] if a_[k] == r else a_[k]
                sw = (Swap(Transform.CHUNK, r, y, g) if full_[k]
                      else Swap(Transform.POSITION, r, y, g, t0_[k], t1_[k]))
                if sw not in seen:
                    seen.add(sw)
                    mine.append(sw)
        glob = []
        pin = placement.pinned
        if placement.allows_global(r, r):
            for y in [y for y in cool if y != r and y != pin][:partners]:
                sw = Swap(Transform.GLOBAL, min(r, y), max(r, y))
                if sw not in seen:
                    seen.add(sw)
                    glob.append(sw)
        if cap is not None and len(mine) + len(glob) > cap:
            keep = max(cap - len(glob), 1)
            pick = (rng or np.random.default_rng(0)).choice(len(mine), size=min(keep, len(mine)), replace=False)
            mine = [mine[k] for k in np.sort(pick)]
        out += glob + mine
    return out


def _candidates(cur: Placement, moves: list[Swap], visited: set[bytes], banned_keys: set[bytes]):
    """``(move, placement, None)`` for each move whose placement is new (not in ``visited``, which
    it joins, nor in ``banned_keys``), in order; the caller scores it by its pattern."""
    for sw in moves:
        nxt = cur.apply(sw)
        key = nxt.key()
        if key in visited or key in banned_keys:
            continue
        visited.add(key)
        yield sw, nxt, None


def _fast_candidates(cur: Placement, cur_pat: CollectivePattern, moves: list[Swap], fast: CandidateScorer,
                     stale: set[int], visited: set[bytes], banned_keys: set[bytes], left: Callable[[], int]):
    """:func:`_candidates` from the endpoint arrays (candidates.py), a block of moves per compiled
    call: ``(move, (src, dst, kappa), (estimate, score))`` for each new move that verifies, or
    ``(move, (src, dst, kappa), None)`` where the pattern path must decide (the arrays are rows of
    the block's: :func:`_placement` makes a placement of them). The same candidates,
    values and order as :func:`_candidates` with the pattern path scoring each. A block holds at
    most ``left()`` moves (the evaluations the search has left when it asks for the block), so
    nothing past the search's budget is scored."""
    deps = cur_pat.__dict__.get("_deps")
    most = max(1, MOVE_BLOCK // max(cur_pat.num_flows, 1))
    lo = 0
    while lo < len(moves) and left() > 0:
        block = min(most, left())
        part = moves[lo:lo + block]
        lo += block
        S, D, P = fast.apply_moves(cur.src, cur.dst, cur.kappa, part)
        rows = []
        for k in range(len(part)):
            key = Placement.key_of(S[k], D[k], P[k])
            if key in visited or key in banned_keys:
                continue
            visited.add(key)
            rows.append(k)
        if not rows:
            continue
        sub = [part[k] for k in rows]
        status, est, val = fast.score_rows(S, D, rows, [sw.graph if sw.graph in stale else -1 for sw in sub], deps,
                                           [sw.kind is Transform.GLOBAL for sw in sub])
        for j, k in enumerate(rows):
            if status[j] == REJECT:
                continue
            yield sub[j], (S[k], D[k], P[k]), ((float(est[j]), float(val[j])) if status[j] == SCORED else None)


def _placement(cur: Placement, nxt: Placement | tuple[np.ndarray, np.ndarray, np.ndarray]) -> Placement:
    """``nxt`` as a placement of ``cur``'s pattern: itself, or built from (copies of) its arrays."""
    if isinstance(nxt, Placement):
        return nxt
    return Placement(cur.original, *(x.copy() for x in nxt), _checked=True)


def _pattern_score(cur_pat: CollectivePattern, sw: Swap, nxt: Placement, stale: set[int],
                   scorer: Callable[[CollectivePattern], tuple[float, float]]) -> tuple[float, float] | None:
    """``scorer`` of the candidate's pattern, checked as the search needs (None: it does not verify)."""
    try:
        q = nxt.unverified_pattern()
        if sw.graph in stale:
            # from a graph's set made stale by an earlier ③ move: verify (cheap next to
            # recomputing the set, which costs seconds on 256 ranks). Only that graph's
            # chunks: the swap relabels flows of that graph alone, chunks never meet, and
            # every other chunk verifies in cur_pat, so this passes iff verify(q) does
            verify(q, chunks=graph_chunks(cur_pat, sw.graph))
        elif sw.kind is Transform.GLOBAL and "_deps" in cur_pat.__dict__:
            # ① renames ranks in every flow (and blocks by a bijection of chunk ids):
            # "earlier flows into my source touching my chunks" is the same relation,
            # so the same dependency arrays (tests/test_tuner_fastpath.py)
            q.__dict__["_deps"] = cur_pat.__dict__["_deps"]
    except (TunerError, PatternError):
        return None
    return scorer(q)


def local_search(placement: Placement, model: LinkModel, flow_bytes: np.ndarray, viable: ViableSwaps,
                 banned: set[Swap] | None = None, banned_keys: set[bytes] | None = None, max_moves: int = 8,
                 max_evals: int = 2000, hot: int = 6, partners: int = 8, all_windows_upto: int = 16,
                 score: Callable[[CollectivePattern], float] | None = None, seed: int = 0,
                 estimator: str = "closed") -> LocalResult:
    """Steepest-descent search over ①②③ moves from ``placement`` (see the module docstring).

    Args:
        placement: where the search starts (the current pattern).
        model: the estimator; ``flow_bytes``: bytes per flow, shape ``(F,)``.
        viable: the ②/③ viable sets of ``placement``; left describing the returned placement
            (a graph changed by a ③ move is forgotten, to be recomputed when next needed).
        banned, banned_keys: moves (in ``placement``'s labels) and placements not to use.
        max_moves, max_evals: most moves taken / candidates scored.
        hot, partners: pruning limits (ranks moved per step, ① partners per rank); ``hot >= N``
            turns the pruning off (every rank, every window).
        all_windows_upto: up to this many ranks every window of a hot rank in its path's chunk
            graphs is a candidate; above it only windows holding one of its path steps.
        score: scores a pattern in seconds instead of the estimator (e.g. measured epoch times,
            for an oracle); lower is better.
        seed: seeds the sample of a hot rank's windows when they are more than
            ``max_evals / (2 hot)`` (large patterns).
        estimator: how a candidate's epoch is estimated (:func:`estimated_epoch`).

    Returns:
        A :class:`LocalResult`; the placement's :attr:`~Placement.pattern` verifies.

    Raises:
        TunerError: the resulting pattern fails verification (a tuner bug).
    """
    banned, banned_keys = banned or set(), banned_keys or set()
    scorer = (lambda q: (score(q), score(q))) if score is not None else (lambda q: _estimate(q, model, flow_bytes, estimator))
    cur = placement
    cur_pat = cur.pattern
    res = LocalResult(cur)
    rng = np.random.default_rng(seed)
    res.est_before, best_val = scorer(cur_pat)
    res.est_after = res.est_before
    visited = {cur.key()}
    stale: set[int] = set()
    first = True
    while len(res.moves) < max_moves and res.evals < max_evals:
        if hot >= cur_pat.num_ranks:          # no pruning: every rank, every window (an oracle's climb)
            graphs = sorted(set(cur_pat.flow_graph.tolist()))
            ranks = [(r, [(g, -1) for g in graphs]) for r in range(cur_pat.num_ranks)]
        else:
            ranks = _hot_ranks(cur_pat, model, flow_bytes, hot)
        best: tuple[float, float, Swap, Placement | tuple] | None = None      # (score, estimate, move, next)
        fast = CandidateScorer(cur_pat, model, flow_bytes, estimator) if score is None and ENDPOINT_SCORING else None
        cap = None if hot >= cur_pat.num_ranks else max(16, max_evals // (2 * max(len(ranks), 1)))
        moves = [sw for sw in _moves(cur, cur_pat, viable, model, ranks, partners,
                                     cur_pat.num_ranks <= all_windows_upto, cap, rng) if not (first and sw in banned)]
        found = (_fast_candidates(cur, cur_pat, moves, fast, stale, visited, banned_keys,
                                  lambda: max_evals - res.evals)
                 if fast is not None and fast.usable else _candidates(cur, moves, visited, banned_keys))
        for sw, nxt, val in found:
            if res.evals >= max_evals:
                break
            if val is None:
                nxt = _placement(cur, nxt)
                val = _pattern_score(cur_pat, sw, nxt, stale, scorer)
                if val is None:
                    continue
            res.evals += 1
            est, v = val
            if v < best_val * (1 - 1e-9) and (best is None or v < best[0]):
                best = (v, est, sw, nxt)
        if best is None:
            break
        best_val, est, sw, nxt = best
        nxt = _placement(cur, nxt)
        if sw.kind is Transform.POSITION:
            stale.add(sw.graph)            # keep using the old set, verifying what it proposes
        else:
            viable.update(cur, sw)
        cur = nxt
        cur_pat = cur.pattern          # verified (the whole pattern)
        res.moves.append(sw)
        res.estimates.append(est)
        res.est_after = est
        first = False
    for g in stale:
        viable.invalidate(g)
    res.placement = cur
    return res

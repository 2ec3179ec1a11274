"""One batch's search for better patterns: REACT Algorithm 1 (A.5, §5.4.1).

Detect congested flows, keep the congested TEN nodes that lie on a critical path (per epoch and
on the mean-FCT graph), steady ones first, and for each try viable swaps — pruned by degree,
③ before ② before ①, degree-lowering first — accepting one when the estimator says the old
critical paths get faster by (1 + ε). Of the batch's accepted swaps, the prefix whose pattern
the same estimator finds fastest as a whole is emitted, and only when that is (1 + ε) faster.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..pattern import CollectivePattern
from ..trace import EpochTrace
from .detect import Congestion, detect_congestion
from .params import ReactParams
from .paths import CriticalPath, FctModel, critical_path, path_time, schedule
from .transforms import DegreeTable, Placement, Swap, Transform, ViableSwaps

__all__ = ["CongestedNode", "Attempt", "SearchResult", "congested_nodes", "candidate_swaps", "apply_transforms",
           "transform_table"]


@dataclass(frozen=True)
class CongestedNode:
    """A TEN vertex ``(step, rank)`` with congested incident flows (``flows``: indices);
    ``direction`` is "in" when they all enter the rank, "out" when they all leave it, else "both"."""

    rank: int
    step: int
    n_steady: int
    n_erratic: int
    flows: tuple[int, ...]
    graphs: tuple[int, ...]
    direction: str = "both"

    @property
    def kind(self) -> str:
        """"steady" when every congested incident flow is steady, else "erratic"."""
        return "steady" if self.n_steady and not self.n_erratic else ("mixed" if self.n_steady else "erratic")


@dataclass
class Attempt:
    """One swap tried by the search, with the estimator's verdict (times in s)."""

    swap: Swap
    node: CongestedNode
    lowers: bool
    est_before: float
    est_after: float
    accepted: bool

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {**self.swap.to_dict(), "node": {"rank": self.node.rank, "step": self.node.step,
                                                "kind": self.node.kind},
                "lowers_degree": self.lowers, "est_before_s": self.est_before, "est_after_s": self.est_after,
                "accepted": self.accepted}


@dataclass
class SearchResult:
    """Outcome of :func:`apply_transforms` (times in s): ``accepted`` swaps make the new
    ``placement``; ``withheld`` ones passed the old-path check but not the whole-pattern one."""

    placement: Placement
    congestion: Congestion | None
    paths: list[CriticalPath]
    accepted: list[Attempt] = field(default_factory=list)
    tried: int = 0
    est_before: float = 0.0
    est_after: float = 0.0
    explored: bool = False
    epoch_before: float = 0.0
    epoch_after: float = 0.0
    withheld: list[Attempt] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.accepted)


def congested_nodes(pattern: CollectivePattern, cong: Congestion,
                    on_paths: set[tuple[int, int]] | None = None) -> list[CongestedNode]:
    """Congested TEN nodes (both ends of each congested flow), optionally only those in
    ``on_paths``, sorted by their steady congested flows, then by how many congested flows touch
    the rank over all steps (a rank whose link is congested collects them), then by their
    congested flows, then (step, rank)."""
    acc: dict[tuple[int, int], list[int]] = {}
    per_rank = np.zeros(pattern.num_ranks, dtype=np.int64)
    hot = np.flatnonzero(cong.congested)
    np.add.at(per_rank, pattern.src[hot], 1)
    np.add.at(per_rank, pattern.dst[hot], 1)
    for f in hot.tolist():
        t = int(pattern.step[f])
        for r in (int(pattern.src[f]), int(pattern.dst[f])):
            if on_paths is None or (t, r) in on_paths:
                acc.setdefault((t, r), []).append(f)
    nodes = []
    for (t, r), fl in acc.items():
        ns = int(np.sum(cong.steady[fl]))
        into = pattern.dst[fl] == r
        direction = "in" if into.all() else ("out" if not into.any() else "both")
        nodes.append(CongestedNode(r, t, ns, len(fl) - ns, tuple(fl),
                                   tuple(sorted(set(pattern.flow_graph[fl].tolist()))), direction))
    nodes.sort(key=lambda n: (-n.n_steady, -per_rank[n.rank], -(n.n_steady + n.n_erratic), n.step, n.rank))
    return nodes


def candidate_swaps(placement: Placement, table: DegreeTable, viable: ViableSwaps, node: CongestedNode,
                    exclude: set[int], tabu: set[Swap], rng: np.random.Generator) -> list[tuple[Swap, bool]]:
    """Viable, degree-pruned swaps that move ``node.rank`` (§5.3.2), best first.

    Order: swaps that lower the node's degree (in the congested direction) first; then ③, ②, ①; random within a
    tier. Partners in ``exclude`` (resolved steady-congested ranks) and swaps in ``tabu`` are
    skipped.
    """
    r, t, N = node.rank, node.step, placement.original.num_ranks
    out: list[Swap] = []
    for g in node.graphs:
        s = viable.for_graph(placement, g)
        for i in s.select(graph=g, rank=r, step=t, full=False):
            y = int(s.b[i] if s.a[i] == r else s.a[i])
            out.append(Swap(Transform.POSITION, r, y, g, int(s.t0[i]), int(s.t1[i])))
        for i in s.select(graph=g, rank=r, full=True):
            y = int(s.b[i] if s.a[i] == r else s.a[i])
            out.append(Swap(Transform.CHUNK, r, y, g))
    if placement.allows_global(r, r):
        pin = placement.pinned
        out.extend(Swap(Transform.GLOBAL, r, y) for y in range(N) if y != r and y != pin)
    tiers: dict[tuple[bool, int], list[tuple[Swap, bool]]] = {}
    for sw in out:
        if sw.b in exclude or sw in tabu or not table.within_budget(sw):
            continue
        low = table.lowers(sw, r, node.direction)
        tiers.setdefault((not low, -int(sw.kind)), []).append((sw, low))
    ranked: list[tuple[Swap, bool]] = []
    for key in sorted(tiers):
        group = tiers[key]
        ranked.extend(group[i] for i in rng.permutation(len(group)))
    return ranked


def _mean_path_time(paths: Sequence[CriticalPath], weights: np.ndarray) -> float:
    return float(np.mean([path_time(p, weights) for p in paths]))


def apply_transforms(placement: Placement, batch: Sequence[EpochTrace], model: FctModel, params: ReactParams,
                     k_t: int, viable: ViableSwaps, exclude: set[int], tabu: set[Swap],
                     rng: np.random.Generator, force: bool = False) -> SearchResult:
    """Algorithm 1 on the pattern of ``placement`` with the batch's traces.

    Args:
        placement: the current pattern's placement (the batch ran its pattern).
        batch: the B traces.
        model: FCT estimator built from the H-epoch history.
        k_t: most swaps to try in this batch.
        viable: the ②/③ swap sets (updated on acceptance).
        exclude: ranks not to swap in (resolved steady-congested ranks); extended on acceptance.
        tabu: swaps not to try (reverted earlier).
        force: explore even without detected congestion (nodes of the mean critical path).

    Each swap is accepted on the old critical paths (§5.4.1 and its footnote 5). At the end only
    the first ``i`` accepted swaps are kept, ``i`` chosen so that the estimated epoch time of the
    new pattern — the longest dependency chain of the whole TEN with estimated FCTs
    (:func:`reactccl.tuner.paths.schedule`) — is lowest, and only if it is (1 + ε) below that of
    the current pattern under the same estimator; the other swaps go to ``withheld`` (``viable``
    and ``exclude`` are restored to the state after swap ``i``). The old-path
    check alone accepts a swap that shortens one of two near-equal paths (e.g. the two trees of
    the double binary tree, or a position whose flows run in parallel with an equally slow one):
    such trials measured no gain (×1.00) or a loss in the simulated fig5a/fig5b/fig12 sweeps and
    cost a batch and a revert each.

    Returns:
        A :class:`SearchResult`; ``placement`` is the new one (the input when nothing was kept);
        ``epoch_before``/``epoch_after`` are the estimated epoch times (s).
    """
    pat = placement.pattern
    cong = detect_congestion(pat, batch, params.delta1, params.delta2)
    fct = np.stack([tr.fct for tr in batch])
    paths = [critical_path(pat, fct[i]) for i in range(len(batch))]
    paths.append(critical_path(pat, fct.mean(axis=0)))
    on_paths: set[tuple[int, int]] = set().union(*(p.nodes(pat) for p in paths))
    nodes = congested_nodes(pat, cong, on_paths)
    if not nodes and force and pat.num_flows:
        mean_path = paths[-1]
        f = int(mean_path.flows[np.argmax(fct.mean(axis=0)[mean_path.flows])])
        nodes = [CongestedNode(int(r), int(pat.step[f]), 0, 1, (f,), (int(pat.flow_graph[f]),))
                 for r in (pat.src[f], pat.dst[f])]
    res = SearchResult(placement, cong, paths)
    if not nodes or pat.num_flows == 0:
        return res
    res.explored = True
    nbytes = batch[-1].flow_bytes
    pred0 = model.predict(pat, nbytes)
    est = _mean_path_time(paths, pred0)
    res.est_before = res.est_after = est
    res.epoch_before = res.epoch_after = _epoch_time(pat, pred0)
    # state after 0, 1, 2, ... accepted swaps: (placement, old-path estimate, whole-pattern
    # estimate, viable sets, excluded ranks)
    prefixes = [(placement, est, res.epoch_before, viable.snapshot(), set(exclude))]
    queue = deque(nodes)
    done: set[tuple[int, int]] = set()
    table = DegreeTable(pat)
    while queue and res.tried < k_t and len(res.accepted) < params.K_max:
        node = queue.popleft()
        if (node.step, node.rank) in done:
            continue
        done.add((node.step, node.rank))
        for sw, low in candidate_swaps(placement, table, viable, node, exclude, tabu, rng):
            if res.tried >= k_t:
                break
            res.tried += 1
            nxt = placement.apply(sw)
            q = nxt.try_pattern()
            if q is None:
                continue
            pred = model.predict(q, nbytes)
            new = _mean_path_time(paths, pred)
            if est > (1.0 + params.epsilon) * new:
                res.accepted.append(Attempt(sw, node, low, est, new, True))
                viable.update(placement, sw)
                placement, est = nxt, new
                table = DegreeTable(q)
                if node.n_steady:
                    exclude.add(node.rank)
                newpath = critical_path(q, pred).nodes(q)
                queue = deque(n for n in nodes if (n.step, n.rank) in newpath and (n.step, n.rank) not in done)
                prefixes.append((placement, est, _epoch_time(q, pred), viable.snapshot(), set(exclude)))
                break
    # keep the prefix of accepted swaps with the lowest whole-pattern estimate, if (1 + eps) faster
    best = min(range(len(prefixes)), key=lambda i: (prefixes[i][2], i))
    if not res.epoch_before > (1.0 + params.epsilon) * prefixes[best][2]:
        best = 0
    placement, est, res.epoch_after, kept_viable, kept_exclude = prefixes[best]
    res.accepted, res.withheld = res.accepted[:best], res.accepted[best:]
    viable.restore(kept_viable)
    exclude.clear()
    exclude.update(kept_exclude)
    res.placement, res.est_after = placement, est
    return res


def _epoch_time(pattern: CollectivePattern, weights: np.ndarray) -> float:
    """Estimated epoch time (s): the longest dependency chain of the whole pattern with FCTs
    ``weights`` (:func:`reactccl.tuner.paths.schedule`)."""
    return float(schedule(pattern, weights)[0].max()) if pattern.num_flows else 0.0


def transform_table(pattern: CollectivePattern, seed: int = 0) -> dict[Transform, dict[str, int | bool]]:
    """Which transforms can act on ``pattern`` at all (react.md Table 1, derived, not looked up).

    Every TEN node ``(step, rank)`` is treated as congested in turn; a transform is available when
    some pruned viable swap of that kind changes the pattern, and ``lowers`` when one of them
    lowers the node's degree (what steady congestion needs; spine/failure congestion only needs
    new paths). Returns ``{transform: {"swaps": count, "available": bool, "lowers": bool}}``.
    """
    pl = Placement(pattern)
    table = DegreeTable(pattern)
    viable = ViableSwaps(seed)
    rng = np.random.default_rng(seed)
    out: dict[Transform, dict[str, int | bool]] = {k: {"swaps": 0, "available": False, "lowers": False}
                                                   for k in Transform}
    seen: set[Swap] = set()
    for t in range(pattern.num_steps):
        for r in range(pattern.num_ranks):
            fl = np.flatnonzero((pattern.step == t) & ((pattern.src == r) | (pattern.dst == r)))
            if not fl.size:
                continue
            node = CongestedNode(r, t, len(fl), 0, tuple(fl.tolist()),
                                 tuple(sorted(set(pattern.flow_graph[fl].tolist()))), "both")
            for sw, low in candidate_swaps(pl, table, viable, node, set(), set(), rng):
                if pl.apply(sw).same_as(pl):
                    continue
                row = out[sw.kind]
                key = Swap(sw.kind, min(sw.a, sw.b), max(sw.a, sw.b), sw.graph, sw.t0, sw.t1)
                if key not in seen:
                    seen.add(key)
                    row["swaps"] = int(row["swaps"]) + 1
                row["available"] = True
                row["lowers"] = bool(row["lowers"]) or low
    return out

"""Positions vs ranks: the tuner's state and REACT's three swap transforms (§5.3).

The original pattern fixes the TEN *positions*; a :class:`Placement` says which rank sits at
each position (per flow endpoint), so every pattern it emits is the original relabelled — whole
(①), per chunk graph (②) or per window of steps in one chunk graph (③) — and verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import ReactcclError
from ..pattern import Collective, CollectivePattern, PatternError, chunk_owner, verify
from .equivalence import SwapSet, find_viable_swaps
from .kernels import swap_endpoints

__all__ = ["TunerError", "Transform", "Swap", "Placement", "DegreeTable", "ViableSwaps"]


class TunerError(ReactcclError, RuntimeError):
    """The tuner was about to emit a pattern that fails verification, or was misused."""


class Transform(IntEnum):
    """REACT's swap transforms (§5.3.1); lower value = coarser, so higher priority is 3 → 1."""

    GLOBAL = 1     # ① swap all instances of two ranks
    CHUNK = 2      # ② swap two ranks in one chunk graph
    POSITION = 3   # ③ swap two ranks in one chunk graph over a window of steps

    @property
    def symbol(self) -> str:
        """①, ② or ③ as in the paper."""
        return "①②③"[self.value - 1]


@dataclass(frozen=True)
class Swap:
    """Exchange ranks ``a`` and ``b`` (current labels) in the flows a transform selects.

    ``graph`` is set for ② and ③, ``t0``/``t1`` (inclusive steps) for ③.
    """

    kind: Transform
    a: int
    b: int
    graph: int | None = None
    t0: int | None = None
    t1: int | None = None

    def __post_init__(self) -> None:
        if self.a == self.b:
            raise TunerError(f"swap: ranks must differ, got {self.a} and {self.b}")
        if self.kind is not Transform.GLOBAL and self.graph is None:
            raise TunerError(f"swap {self.kind.symbol}: needs a chunk graph")
        if self.kind is Transform.POSITION and (self.t0 is None or self.t1 is None or self.t0 > self.t1):
            raise TunerError(f"swap ③: needs a step window t0 <= t1, got {self.t0}..{self.t1}")

    def mask(self, pattern: CollectivePattern) -> np.ndarray:
        """Flows of ``pattern`` this swap relabels, shape ``(F,)``."""
        p = pattern
        m = (p.src == self.a) | (p.src == self.b) | (p.dst == self.a) | (p.dst == self.b)
        if self.graph is not None:
            m &= p.flow_graph == self.graph
        if self.t0 is not None:
            m &= (p.step >= self.t0) & (p.step <= self.t1)
        return m

    def __str__(self) -> str:
        where = "" if self.graph is None else f" in graph {self.graph}"
        if self.t0 is not None:
            where += f", steps {self.t0}..{self.t1}"
        return f"{self.kind.symbol} swap ranks {self.a}<->{self.b}{where}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"transform": int(self.kind), "symbol": self.kind.symbol, "a": self.a, "b": self.b,
                "graph": self.graph, "t0": self.t0, "t1": self.t1}


class Placement:
    """Which rank sits at each TEN position of ``original`` (immutable).

    Attributes:
        original: the pattern whose flows are the positions.
        src, dst: rank at the sending/receiving end of each position, shape ``(F,)``.
        kappa: rank holding position ``o``'s input block (AllGather/ReduceScatter/AllToAll; an
            AllToAll block (s, d) belongs to ranks ``(kappa[s], kappa[d])``) or the root
            (Broadcast/Reduce), moved by ① only, shape ``(N,)``.

    Raises:
        VerificationError: ``original`` is not correct.
    """

    def __init__(self, original: CollectivePattern, src: np.ndarray | None = None,
                 dst: np.ndarray | None = None, kappa: np.ndarray | None = None, _checked: bool = False) -> None:
        if not _checked:
            verify(original)
        self.original = original
        self.src = original.src.copy() if src is None else src
        self.dst = original.dst.copy() if dst is None else dst
        self.kappa = np.arange(original.num_ranks) if kappa is None else kappa

    @cached_property
    def _blocks(self) -> np.ndarray | None:
        """Chunk ids of each block, shape ``(B, k)`` (B = N, or N*N for AllToAll, whose block
        ``s*N + d`` is rank s's data for rank d), or None when blocks differ in layout."""
        p = self.original
        if not p.collective.is_blocked:
            return None
        own = p.chunk_block
        B = p.collective.num_blocks(p.num_ranks)
        cnt = np.bincount(own, minlength=B)
        if np.any(cnt != cnt[0]):
            return None
        blocks = np.argsort(own, kind="stable").reshape(B, cnt[0])
        if not np.allclose(p.chunk_size[blocks], p.chunk_size[blocks[0]][None, :]):
            return None
        return blocks

    @property
    def supports_global(self) -> bool:
        """Whether ① is available (blocked collectives need equal block layouts)."""
        return not self.original.collective.is_blocked or self._blocks is not None

    @property
    def pinned(self) -> int | None:
        """The rank ① must not move, or None: the root of a Broadcast or Reduce. The caller
        named it (``root=`` in NCCL's ncclBroadcast/ncclReduce), so a ① swap that moved it would
        compute another collective (another rank's buffer broadcast) which still verifies
        against its own, moved, root."""
        p = self.original
        return int(self.kappa[p.root]) if p.collective.needs_root else None

    def allows_global(self, a: int, b: int) -> bool:
        """Whether ① may swap ranks ``a`` and ``b``: :attr:`supports_global`, and neither is
        :attr:`pinned`."""
        return self.supports_global and self.pinned not in (a, b)

    def apply(self, swap: Swap) -> "Placement":
        """The placement after ``swap`` (its ranks are current labels). Not verified here.

        Raises:
            TunerError: a rank out of range; a ① swap of a pattern whose blocks differ in
                layout, or one that moves the root of a Broadcast/Reduce (:attr:`pinned`).
        """
        n = self.original.num_ranks
        for r in (swap.a, swap.b):
            if not 0 <= r < n:
                raise TunerError(f"swap: rank {r} out of range 0..{n - 1}")
        if swap.kind is Transform.GLOBAL:
            if not self.supports_global:
                raise TunerError("swap ①: blocks of this pattern differ in layout; a global swap cannot move them")
            if self.pinned in (swap.a, swap.b):
                raise TunerError(f"swap ① {swap.a}<->{swap.b}: rank {self.pinned} is the "
                                 f"{self.original.collective.value}'s root, which ① must not move")
            sig = np.arange(n)
            sig[swap.a], sig[swap.b] = swap.b, swap.a
            return Placement(self.original, sig[self.src], sig[self.dst], sig[self.kappa], _checked=True)
        o = self.original
        # the swap's graph is the current pattern's: a ① swap of a blocked collective moves blocks,
        # and with them the chunk graph of each flow; elsewhere the graphs stay the original's
        fg = self.pattern.flow_graph if o.collective.is_blocked else o.flow_graph
        src, dst = swap_endpoints(self.src, self.dst, fg, o.step, swap.a, swap.b, swap.graph, swap.t0,
                                  swap.t1)       # np.where(swap.mask(self.pattern), sig[src], src), compiled
        return Placement(o, src, dst, self.kappa, _checked=True)

    @cached_property
    def pattern(self) -> CollectivePattern:
        """The pattern the ranks run: ``original`` relabelled, verified.

        Raises:
            TunerError: it does not compute the collective (a tuner bug; never emitted).
        """
        q = self.unverified_pattern()
        try:
            verify(q)
        except PatternError as exc:
            raise TunerError(f"tuner produced an incorrect pattern: {exc}") from exc
        return q

    def unverified_pattern(self) -> CollectivePattern:
        """:attr:`pattern` without :func:`verify`, for scoring candidates that are correct by
        construction (viable swaps, ①) inside a search; what the tuner emits is always
        :attr:`pattern`.

        Raises:
            TunerError: the arrays do not even form a pattern.
        """
        if "pattern" in self.__dict__:
            return self.__dict__["pattern"]
        p = self.original
        fields: dict[str, Any] = {"src": self.src, "dst": self.dst}
        if p.collective.is_blocked and self._blocks is not None and np.any(self.kappa != np.arange(p.num_ranks)):
            blocks = self._blocks
            k = self.kappa
            # block r moves to rank kappa[r]'s; an AllToAll block (s, d) to (kappa[s], kappa[d])
            moved = (k[:, None] * p.num_ranks + k[None, :]).reshape(-1) \
                if p.collective is Collective.ALLTOALL else k
            cmap = np.empty(p.num_chunks, dtype=np.int64)
            cmap[blocks.reshape(-1)] = blocks[moved].reshape(-1)
            fields["chunk_idx"] = cmap[p.chunk_idx]
        if p.collective.needs_root:
            fields["root"] = int(self.kappa[p.root])
        try:
            if "chunk_idx" not in fields:       # only the endpoints (and root) move: check just those
                return p.relabelled(self.src, self.dst, fields.get("root", p.root))
            return p.replace(**fields)
        except PatternError as exc:
            raise TunerError(f"tuner produced an incorrect pattern: {exc}") from exc

    def try_pattern(self) -> CollectivePattern | None:
        """:attr:`pattern`, or None when it fails verification."""
        try:
            return self.pattern
        except TunerError:
            return None

    def position_map(self, flows: np.ndarray | None = None) -> dict[str, list[int]]:
        """``{"g<graph> t<step> p<position>": [ranks]}`` for the given flows (default: all), where
        the position is the original rank label of the endpoint; compact, for decision logs."""
        p = self.original
        fl = np.arange(p.num_flows) if flows is None else np.flatnonzero(flows) if np.asarray(flows).dtype == bool \
            else np.asarray(flows)
        out: dict[str, set[int]] = {}
        for f in fl.tolist():
            for pos, rank in ((p.src[f], self.src[f]), (p.dst[f], self.dst[f])):
                out.setdefault(f"g{p.flow_graph[f]} t{p.step[f]} p{pos}", set()).add(int(rank))
        return {k: sorted(v) for k, v in sorted(out.items())}

    def key(self) -> bytes:
        """A hashable identity of the placement (equal keys: same ranks at every position)."""
        return self.key_of(self.src, self.dst, self.kappa)

    @staticmethod
    def key_of(src: np.ndarray, dst: np.ndarray, kappa: np.ndarray) -> bytes:
        """:meth:`key` of the placement with these arrays (int64, shapes ``(F,)``, ``(F,)``, ``(N,)``),
        without building it."""
        return src.tobytes() + dst.tobytes() + kappa.tobytes()

    def same_as(self, other: "Placement") -> bool:
        """True when both place the same ranks at every position."""
        return (np.array_equal(self.src, other.src) and np.array_equal(self.dst, other.dst)
                and np.array_equal(self.kappa, other.kappa))


class DegreeTable:
    """Per-step degrees of a pattern for pruning (§5.3.2); degree = max(in, out) at a step,
    counted over all chunk graphs (the §5.2 definition)."""

    def __init__(self, pattern: CollectivePattern) -> None:
        self.pattern = pattern
        self.indeg, self.outdeg = pattern.degrees()
        self.deg = np.maximum(self.indeg, self.outdeg)
        self._g: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _graph(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        if g not in self._g:
            p = self.pattern
            T, N = self.deg.shape
            sel = p.flow_graph == g
            base = p.step[sel] * N
            self._g[g] = (np.bincount(base + p.dst[sel], minlength=T * N).reshape(T, N),
                          np.bincount(base + p.src[sel], minlength=T * N).reshape(T, N))
        return self._g[g]

    def after_io(self, swap: Swap) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """In- and out-degrees of ``swap.a`` and ``swap.b`` at every step after the swap:
        ``(in_a, out_a, in_b, out_b)``, each shape ``(T,)``."""
        a, b = swap.a, swap.b
        if swap.kind is Transform.GLOBAL:
            return (self.indeg[:, b].copy(), self.outdeg[:, b].copy(), self.indeg[:, a].copy(),
                    self.outdeg[:, a].copy())
        gi, go = self._graph(int(swap.graph))
        w = np.ones(self.deg.shape[0], dtype=bool)
        if swap.t0 is not None:
            w[:] = False
            w[swap.t0:swap.t1 + 1] = True
        di = np.where(w, gi[:, b] - gi[:, a], 0)
        do = np.where(w, go[:, b] - go[:, a], 0)
        return (self.indeg[:, a] + di, self.outdeg[:, a] + do, self.indeg[:, b] - di, self.outdeg[:, b] - do)

    def after(self, swap: Swap) -> tuple[np.ndarray, np.ndarray]:
        """Degrees (max of in and out) of ``swap.a`` and ``swap.b`` at every step after the swap,
        each shape ``(T,)``."""
        ia, oa, ib, ob = self.after_io(swap)
        return np.maximum(ia, oa), np.maximum(ib, ob)

    def within_budget(self, swap: Swap) -> bool:
        """§5.3.2: after the swap neither rank's degree at any step exceeds the degree the
        positions it takes had before, i.e. max(deg(a, t), deg(b, t))."""
        na, nb = self.after(swap)
        cap = np.maximum(self.deg[:, swap.a], self.deg[:, swap.b])
        return bool(np.all(na <= cap) and np.all(nb <= cap))

    def lowers(self, swap: Swap, rank: int, direction: str = "both") -> bool:
        """Whether the swap lowers ``rank``'s largest in-degree (``"in"``: congestion on flows
        into it), out-degree (``"out"``) or degree (``"both"``) over the steps: within the swapped
        chunk graph for ② and ③, over the whole pattern for ①. §4.3: a useful swap leaves the
        congested node no step where it "will still receive two incoming flows" of that tree."""
        if direction not in ("in", "out", "both"):
            raise ValueError(f"lowers: direction must be 'in', 'out' or 'both', got {direction!r}")
        other = swap.b if rank == swap.a else swap.a
        if swap.kind is Transform.GLOBAL:
            gi, go = self.indeg, self.outdeg
            w = np.ones(self.deg.shape[0], dtype=bool)
        else:
            gi, go = self._graph(int(swap.graph))
            w = np.ones(self.deg.shape[0], dtype=bool)
            if swap.t0 is not None:
                w[:] = False
                w[swap.t0:swap.t1 + 1] = True
        ni = np.where(w, gi[:, other], gi[:, rank])
        no = np.where(w, go[:, other], go[:, rank])
        if direction == "in":
            return bool(ni.max() < gi[:, rank].max())
        if direction == "out":
            return bool(no.max() < go[:, rank].max())
        return bool(np.maximum(ni, no).max() < np.maximum(gi[:, rank], go[:, rank]).max())


class ViableSwaps:
    """Viable ②/③ swaps of the current pattern per chunk graph, computed once per pattern with
    :func:`find_viable_swaps` and carried through later relabellings where that is exact.

    For AllReduce a chunk graph's sub-collective is symmetric in the ranks, so after ① or ② a
    graph's set is the old one relabelled; any other change recomputes the graph's set on demand.

    Args:
        seed: seed of :func:`find_viable_swaps`' prefilter (the sets do not depend on it).
        memo: optional dict shared between instances: sets already computed for a pattern
            (keyed by graph and the pattern's arrays) are reused, e.g. after a revert.
    """

    def __init__(self, seed: int = 0, memo: dict | None = None) -> None:
        self.seed = seed
        self.memo = {} if memo is None else memo
        self._sets: dict[int, tuple[SwapSet, np.ndarray]] = {}
        self.computed = 0

    def for_graph(self, placement: Placement, g: int) -> SwapSet:
        """Viable window swaps of graph ``g`` in the current rank labels (``a < b``)."""
        g = int(g)
        if g not in self._sets:
            pat = placement.pattern
            key = (g, pat.src.tobytes(), pat.dst.tobytes(), pat.chunk_idx.tobytes())
            if key not in self.memo:
                self.memo[key] = find_viable_swaps(pat, graphs=[g], seed=self.seed, check=False)
                self.computed += 1
            self._sets[g] = (self.memo[key], np.arange(placement.original.num_ranks))
        s, rho = self._sets[g]
        a, b = rho[s.a], rho[s.b]
        return SwapSet(s.graph, s.t0, s.t1, np.minimum(a, b), np.maximum(a, b), s.full)

    def snapshot(self) -> dict:
        """The current per-graph state, for :meth:`restore` after a revert."""
        return dict(self._sets)

    def restore(self, state: dict) -> None:
        """Go back to a :meth:`snapshot`."""
        self._sets = dict(state)

    def invalidate(self, graph: int) -> None:
        """Forget graph ``graph``'s set (recomputed on the next :meth:`for_graph`)."""
        self._sets.pop(int(graph), None)

    def update(self, placement_before: Placement, swap: Swap) -> None:
        """Account for ``swap`` applied to ``placement_before``."""
        symmetric = placement_before.original.collective is Collective.ALLREDUCE
        n = placement_before.original.num_ranks
        sig = np.arange(n)
        sig[swap.a], sig[swap.b] = swap.b, swap.a
        if swap.kind is Transform.GLOBAL:
            if not symmetric:
                self._sets.clear()
                return
            for g, (s, rho) in list(self._sets.items()):
                self._sets[g] = (s, sig[rho])
        elif swap.kind is Transform.CHUNK and symmetric:
            if swap.graph in self._sets:
                s, rho = self._sets[swap.graph]
                self._sets[swap.graph] = (s, sig[rho])
        else:
            self._sets.pop(int(swap.graph), None)

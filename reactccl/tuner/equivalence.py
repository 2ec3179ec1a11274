"""Semantically viable window swaps: transforms ② and ③ of REACT (§5.3.1, A.3), exact and fast.

A *window swap* ``(g, t0, t1, a, b)`` exchanges ranks ``a`` and ``b`` in every flow of chunk graph
``g`` whose step lies in ``[t0, t1]``. Windows are canonical: ``t0`` and ``t1`` are steps where
``a`` or ``b`` has a flow in ``g``. The window spanning all of their activity in ``g`` is the
chunk-local permutation swap ② (``full``); the others are position-equivalent swaps ③, REACT's
"single TEN positions" cut at step granularity (A.3 swaps TEN vertices; a rank's vertices of one
chunk graph over consecutive steps is the finest unit that a relabelling of whole flows can move).

The paper finds them by brute force, verifying every candidate: O((N log N)^3) for trees.
:func:`find_viable_swaps` gives the same set (tested against the brute force for small N) with
linear algebra on contribution counts, per chunk of ``g``:

- ``S_t`` (N x N) counts, for each rank, how often each contributor is in its copy of the chunk at
  step boundary t; a step is a linear map ``S_{t+1} = A_t S_t`` (a reduce adds the sender's row,
  a copy replaces the receiver's row). ``M_{s→t}`` is the product of the steps in between and
  ``R_t = M_{t→T}`` maps a state at t to the final state (rows: the ranks the collective
  constrains).
- Relabelling the window's flows by the transposition ``P = I - d dᵀ`` (``d = e_a - e_b``) conjugates
  its steps, so the swapped run is ``S'_T = R_e P M_{t0→e} P S_t0`` with ``e = t1 + 1``: the
  original run with the states of a and b exchanged at t0 and at e. Expanding,
  ``S'_T - S_T = -(q αᵀ + r βᵀ)`` with ``β = S_t0[a] - S_t0[b]``, ``α = S_e[a] - S_e[b] - μ β``,
  ``q = R_e d``, ``r = R_t0 d``, ``μ = dᵀ M_{t0→e} d``. The swap is valid iff this is zero for
  every chunk: the original is valid, and relabelling one step's flows by a bijection cannot
  create the conflicting writes ``verify`` rejects.
- ``β = 0``: valid iff ``q = 0`` or ``α = 0``; ``q = 0``: valid iff ``r = 0`` (both by equal-row
  class ids, O(1) per candidate); otherwise ``q αᵀ = -r βᵀ`` is tested exactly in integers after a
  random projection ``wᵀ(q αᵀ + r βᵀ)h = 0`` that never rejects a valid swap.
- AllGather, Broadcast and AllToAll ranks can hold nothing, and ``verify`` also rejects sending a chunk one
  does not hold: there the survivors are confirmed with :func:`verify`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..pattern import Collective, CollectivePattern, PatternError, chunk_dest, chunk_owner, verify

__all__ = ["SwapSet", "window_mask", "apply_window_swap", "candidate_windows", "find_viable_swaps",
           "brute_force_viable_swaps"]


@dataclass(frozen=True)
class SwapSet:
    """Window swaps, one entry per index; all arrays int64 (``full`` bool) of shape ``(K,)``,
    ``a < b``. ``full`` marks chunk-local swaps ② (the window covers all activity of a and b)."""

    graph: np.ndarray
    t0: np.ndarray
    t1: np.ndarray
    a: np.ndarray
    b: np.ndarray
    full: np.ndarray

    def __len__(self) -> int:
        return len(self.graph)

    @staticmethod
    def empty() -> "SwapSet":
        z = np.zeros(0, dtype=np.int64)
        return SwapSet(z, z, z, z, z, np.zeros(0, dtype=bool))

    @staticmethod
    def concat(parts: list["SwapSet"]) -> "SwapSet":
        """All entries of ``parts`` in order."""
        if not parts:
            return SwapSet.empty()
        return SwapSet(*(np.concatenate([getattr(p, k) for p in parts])
                         for k in ("graph", "t0", "t1", "a", "b", "full")))

    def take(self, idx: np.ndarray) -> "SwapSet":
        """The entries at ``idx`` (indices or boolean mask)."""
        return SwapSet(self.graph[idx], self.t0[idx], self.t1[idx], self.a[idx], self.b[idx], self.full[idx])

    def select(self, graph: int | None = None, rank: int | None = None, step: int | None = None,
               full: bool | None = None) -> np.ndarray:
        """Indices of entries in ``graph`` that move ``rank`` and whose window contains ``step``."""
        m = np.ones(len(self), dtype=bool)
        if graph is not None:
            m &= self.graph == graph
        if rank is not None:
            m &= (self.a == rank) | (self.b == rank)
        if step is not None:
            m &= (self.t0 <= step) & (step <= self.t1)
        if full is not None:
            m &= self.full == full
        return np.flatnonzero(m)

    def as_set(self) -> set[tuple[int, int, int, int, int, bool]]:
        """Entries as ``(graph, t0, t1, a, b, full)`` tuples (for comparisons in tests)."""
        return set(zip(self.graph.tolist(), self.t0.tolist(), self.t1.tolist(), self.a.tolist(),
                       self.b.tolist(), self.full.tolist()))


def window_mask(pattern: CollectivePattern, graph: int, t0: int, t1: int, a: int, b: int) -> np.ndarray:
    """Flows of ``graph`` with step in ``[t0, t1]`` that touch rank ``a`` or ``b``, shape ``(F,)``."""
    p = pattern
    return ((p.flow_graph == graph) & (p.step >= t0) & (p.step <= t1)
            & ((p.src == a) | (p.src == b) | (p.dst == a) | (p.dst == b)))


def apply_window_swap(pattern: CollectivePattern, graph: int, t0: int, t1: int, a: int, b: int) -> CollectivePattern:
    """``pattern`` with ranks ``a`` and ``b`` exchanged in the window's flows (not verified)."""
    perm = np.arange(pattern.num_ranks)
    perm[a], perm[b] = b, a
    return pattern.relabel(perm, flows=window_mask(pattern, graph, t0, t1, a, b))


def _graph_ids(pattern: CollectivePattern, graphs) -> list[int]:
    have = sorted(set(pattern.flow_graph.tolist()))
    if graphs is None:
        return have
    out = [int(g) for g in graphs]
    bad = [g for g in out if g not in have]
    if bad:
        raise PatternError(f"graphs: chunk graph {bad[0]} has no flows (graphs with flows: {have[:16]})")
    return out


def candidate_windows(pattern: CollectivePattern, graphs=None) -> SwapSet:
    """Every canonical window swap of the given chunk graphs, not yet checked for semantics.

    A window swap ``(g, t0, t1, a, b)`` exchanges ranks ``a < b`` in every flow of chunk graph
    ``g`` whose step lies in ``[t0, t1]``; canonical windows start and end at steps where ``a``
    or ``b`` has a flow in ``g`` (the module docstring explains why these suffice).

    Args:
        pattern: the original pattern (positions).
        graphs: chunk-graph ids to enumerate (default: all).

    Returns:
        A :class:`SwapSet` with one entry per candidate; ``full`` marks windows covering all of
        ``a``'s and ``b``'s activity in ``g`` (transform ②). At most ``G·N²·T²/2`` entries.

    Raises:
        PatternError: an unknown chunk-graph id.
    """
    p, N, T = pattern, pattern.num_ranks, max(pattern.num_steps, 1)
    parts = []
    ai, bi = np.triu_indices(N, 1)
    for g in _graph_ids(p, graphs):
        sel = p.flow_graph == g
        act = np.zeros((T, N), dtype=bool)
        act[p.step[sel], p.src[sel]] = True
        act[p.step[sel], p.dst[sel]] = True
        U = (act[:, ai] | act[:, bi]).T
        m = U.sum(axis=1)
        order = np.argsort(~U, axis=1, kind="stable")
        for i in range(int(m.max()) if m.size else 0):
            for j in range(i, int(m.max())):
                ok = np.flatnonzero(m > j)
                if not ok.size:
                    continue
                full = (i == 0) & (m[ok] - 1 == j)
                parts.append(SwapSet(np.full(len(ok), g, dtype=np.int64), order[ok, i].astype(np.int64),
                                     order[ok, j].astype(np.int64), ai[ok].astype(np.int64),
                                     bi[ok].astype(np.int64), full))
    out = SwapSet.concat(parts)
    key = np.lexsort((out.t1, out.t0, out.b, out.a, out.graph))
    return out.take(key)


def _initial_counts(p: CollectivePattern, c: int) -> np.ndarray:
    N = p.num_ranks
    S0 = np.zeros((N, N), dtype=np.int64)
    if p.collective in (Collective.ALLGATHER, Collective.ALLTOALL):
        o = int(chunk_owner(p)[c])
        S0[o, o] = 1
    elif p.collective is Collective.BROADCAST:
        S0[p.root, p.root] = 1
    else:
        S0[np.arange(N), np.arange(N)] = 1
    return S0


def _checked_ranks(p: CollectivePattern, c: int) -> np.ndarray:
    """Ranks whose final state of chunk ``c`` the collective constrains (ReduceScatter: the
    block's owner; AllToAll: the block's destination; Reduce: the root; otherwise every rank)."""
    if p.collective is Collective.REDUCESCATTER:
        return chunk_owner(p)[c:c + 1]
    if p.collective is Collective.ALLTOALL:
        return chunk_dest(p)[c:c + 1]
    if p.collective is Collective.REDUCE:
        return np.array([p.root])
    return np.arange(p.num_ranks)


def _chunk_steps(p: CollectivePattern, c: int, T: int):
    """Per step: (src, dst, copy targets) of the flows carrying chunk ``c``."""
    f = p.pair_flow[p.chunk_idx == c]
    out = []
    for t in range(T):
        ft = f[p.step[f] == t]
        out.append((p.src[ft], p.dst[ft], p.dst[ft][p.op[ft] == 1]))
    return out


def _forward(X: np.ndarray, st) -> np.ndarray:
    src, dst, cp = st
    Y = X.copy()
    Y[cp] = 0
    np.add.at(Y, dst, X[src])
    return Y


def _backward(X: np.ndarray, st) -> np.ndarray:
    src, dst, cp = st
    Y = X.copy()
    Y[cp] = 0
    np.add.at(Y, src, X[dst])
    return Y


def _row_ids(M: np.ndarray) -> np.ndarray:
    """Class id of every row of ``M`` (shape ``(T, N, K)``; equal rows, equal ids), shape ``(T, N)``."""
    flat = np.ascontiguousarray(M.reshape(-1, M.shape[2]))
    _, inv = np.unique(flat.view(np.dtype((np.void, flat.dtype.itemsize * flat.shape[1]))).reshape(-1),
                       return_inverse=True)
    return inv.reshape(M.shape[:2])


def _chunk_valid(p: CollectivePattern, c: int, cand: SwapSet, rng: np.random.Generator) -> np.ndarray:
    """Whether each candidate leaves chunk ``c``'s final counts unchanged (see module doc)."""
    N, T = p.num_ranks, p.num_steps
    steps = _chunk_steps(p, c, T)
    S = np.empty((T + 1, N, N), dtype=np.int64)
    S[0] = _initial_counts(p, c)
    for t in range(T):
        S[t + 1] = _forward(S[t], steps[t])
    checked = _checked_ranks(p, c)
    RT = np.empty((T + 1, N, len(checked)), dtype=np.int64)
    RT[T] = np.eye(N, dtype=np.int64)[:, checked]
    for t in range(T - 1, -1, -1):
        RT[t] = _backward(RT[t + 1], steps[t])
    sid, rid = _row_ids(S), _row_ids(RT)
    a, b, t0, e = cand.a, cand.b, cand.t0, cand.t1 + 1
    B0 = sid[t0, a] == sid[t0, b]
    D1 = sid[e, a] == sid[e, b]
    Q0 = rid[e, a] == rid[e, b]
    R0 = rid[t0, a] == rid[t0, b]
    ok = np.where(B0, Q0 | D1, Q0 & R0)
    gen = np.flatnonzero(~B0 & ~Q0)
    if not gen.size:
        return ok
    mu = np.zeros(len(gen), dtype=np.int64)
    g0, ge, ga, gb = t0[gen], e[gen], a[gen], b[gen]
    for s0 in np.unique(g0):
        rows = np.flatnonzero(g0 == s0)
        X = np.eye(N, dtype=np.int64)
        for s in range(int(s0), int(ge[rows].max())):
            X = _forward(X, steps[s])
            at = rows[ge[rows] == s + 1]
            if at.size:
                x, y = ga[at], gb[at]
                mu[at] = X[x, x] - X[x, y] - X[y, x] + X[y, y]
    w = rng.integers(1, 1 << 16, size=len(checked))
    h = rng.integers(1, 1 << 16, size=N)
    u = RT @ w
    v = S @ h
    wq = u[ge, ga] - u[ge, gb]
    wr = u[g0, ga] - u[g0, gb]
    hb = v[g0, ga] - v[g0, gb]
    ha = v[ge, ga] - v[ge, gb] - mu * hb
    surv = np.flatnonzero(wq * ha + wr * hb == 0)
    res = np.zeros(len(gen), dtype=bool)
    for lo in range(0, len(surv), 4096):
        k = surv[lo:lo + 4096]
        x0, xe, xa, xb, m = g0[k], ge[k], ga[k], gb[k], mu[k]
        qv = RT[xe, xa] - RT[xe, xb]
        rv = RT[x0, xa] - RT[x0, xb]
        beta = S[x0, xa] - S[x0, xb]
        alpha = S[xe, xa] - S[xe, xb] - m[:, None] * beta
        col = np.argmax(np.abs(qv), axis=1)
        ii = np.arange(len(k))
        qs, rs = qv[ii, col][:, None], rv[ii, col][:, None]
        res[k] = (np.all(qs * alpha + rs * beta == 0, axis=1) & np.all(rv * qs - qv * rs == 0, axis=1))
    ok[gen] = res
    return ok


def find_viable_swaps(pattern: CollectivePattern, graphs=None, seed: int = 0, check: bool = True) -> SwapSet:
    """All window swaps (② and ③) of ``pattern`` that keep it computing its collective.

    Equal to :func:`brute_force_viable_swaps` (tested for small N) at a fraction of its cost:
    O(G·C_g·T²·N²) plus O(1) per candidate for most candidates. ``seed`` only drives the
    prefilter's random projections; the result does not depend on it. ``check=False`` skips
    verifying ``pattern`` itself (the method assumes it is correct).

    Raises:
        VerificationError: ``pattern`` itself is not correct.
    """
    if check:
        verify(pattern)
    rng = np.random.default_rng(seed)
    cand = candidate_windows(pattern, graphs)
    if not len(cand):
        return cand
    alive = np.ones(len(cand), dtype=bool)
    for g in np.unique(cand.graph):
        rows = np.flatnonzero(cand.graph == g)
        sub = cand.take(rows)
        ok = np.ones(len(rows), dtype=bool)
        for c in pattern.chunk_graphs()[int(g)]:
            live = np.flatnonzero(ok)
            if not live.size:
                break
            ok[live] = _chunk_valid(pattern, int(c), sub.take(live), rng)
        alive[rows] = ok
    out = cand.take(alive)
    if pattern.collective in (Collective.ALLGATHER, Collective.BROADCAST, Collective.ALLTOALL):
        out = out.take(_verified(pattern, out))
    return out


def _verified(pattern: CollectivePattern, s: SwapSet) -> np.ndarray:
    ok = np.zeros(len(s), dtype=bool)
    for i in range(len(s)):
        q = apply_window_swap(pattern, int(s.graph[i]), int(s.t0[i]), int(s.t1[i]), int(s.a[i]), int(s.b[i]))
        try:
            verify(q)
            ok[i] = True
        except PatternError:
            pass
    return ok


def brute_force_viable_swaps(pattern: CollectivePattern, graphs=None) -> SwapSet:
    """The paper's brute force (A.3): apply every candidate window swap and :func:`verify` it."""
    verify(pattern)
    cand = candidate_windows(pattern, graphs)
    return cand.take(_verified(pattern, cand))

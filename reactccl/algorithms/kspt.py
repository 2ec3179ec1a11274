"""k-SP-allreduce: depth-bounded trees with shortest-path routed edges, symmetrised on a torus.

A k-hop tree has depth h(T) <= k; its AllReduce takes h(T) reduce rounds then h(T)
broadcast rounds. A tree edge may join nodes that are not neighbours; it is routed on a
shortest path, so the extra traffic is measured by ``W(T) = Σ_{tree edges} dist(u, v)``
(Θ = W(T) / (p - 1) for the symmetrised schedule). SP-allreduce §5 (text mostly lost; see
NOTES.md): how the paper builds its trees is not known, so this module builds them as
follows.

Layered construction. Choose distances ``0 = L_0 < L_1 < ... < L_h = H`` (h <= k). A node
at torus distance D from the root with ``L_{j-1} < D <= L_j`` sits at tree depth j and its
parent is a node at distance ``L_{j-1}`` on a shortest path to the root: the offsets
``(a_1..a_d)`` shrink to ``round(a_i * L_{j-1} / D)`` (largest remainders keep the sum), so
the parents spread evenly. Every edge is then a shortest-path segment of length
``D - L_{j-1}``, and ``W = Σ_D N_D (D - L_{prev(D)})`` (N_D nodes at distance D) is
minimised exactly over the thresholds by dynamic programming. k >= H gives the BFS tree
(W = p - 1), k = 1 the star (W = Σ distances). The tree is symmetrised under the torus
group Γ as in SP-allreduce; Ψ = 1, Θ = W/(p-1); Ω is what dimension-order routes give.

Example, 8 x 8 (H = 8, layers N_D = 1, 4, 8, 12, 14, 12, 8, 4, 1): k = 2 picks L = (0, 3, 8),
W = (4 + 16 + 36) + (14 + 24 + 24 + 16 + 5) = 139 against 63 for BFS and 256 for the star.

Source: SP-allreduce §1.1 item 3, §5 (W(T)), §7.2 Table 1; NOTES.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ..topology.torus import TorusGeometry
from .registry import register
from .torus_common import assemble, parse_shape, symmetrize, torus_group, tree_schedule

__all__ = ["layer_thresholds", "ksp_tree", "ksp_allreduce"]


def layer_thresholds(layer_sizes: Sequence[int], k: int) -> tuple[list[int], int]:
    """Distances ``[0, L_1, ..., H]`` (at most k layers) minimising
    ``W = Σ_D N_D (D - L_prev(D))`` for layer sizes ``N_D`` (D = 0..H); returns ``(L, W)``.

    Raises:
        PatternError: k < 1.
    """
    if k < 1:
        raise PatternError(f"k-SP-allreduce: k must be >= 1, got {k}")
    N = np.asarray(layer_sizes, dtype=np.int64)
    H = len(N) - 1
    k = min(k, H) if H > 0 else 1
    if H == 0:
        return [0], 0
    D = np.arange(H + 1)
    # cost[s, t] = Σ_{s < D <= t} N_D (D - s)
    cost = np.full((H + 1, H + 1), np.inf)
    for s in range(H):
        w = N[s + 1:] * (D[s + 1:] - s)
        cost[s, s + 1:] = np.cumsum(w)
    best = np.full((k + 1, H + 1), np.inf)
    arg = np.zeros((k + 1, H + 1), dtype=np.int64)
    best[0, 0] = 0
    for i in range(1, k + 1):
        tot = best[i - 1][:, None] + cost  # (s, t)
        arg[i] = np.argmin(tot, axis=0)
        best[i] = tot[arg[i], np.arange(H + 1)]
    i = int(np.argmin(best[:, H]))
    W = int(best[i, H])
    L, t = [H], H
    while i > 0:
        t = int(arg[i, t])
        L.append(t)
        i -= 1
    return L[::-1], W


def _shrink(off: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Offsets scaled towards 0 so their |.|-sum is ``target`` (largest remainder rounding)."""
    a = np.abs(off).astype(np.float64)
    tot = a.sum(axis=1)
    scale = np.divide(target, tot, out=np.zeros_like(tot), where=tot > 0)
    exact = a * scale[:, None]
    base = np.floor(exact).astype(np.int64)
    short = target - base.sum(axis=1)
    rank = np.argsort(np.argsort(-(exact - base), axis=1, kind="stable"), axis=1)
    base += rank < short[:, None]
    return np.sign(off) * base


def ksp_tree(geom: TorusGeometry, k: int) -> tuple[np.ndarray, list[int], int]:
    """The layered k-hop tree of the torus rooted at 0 (see the module docstring).

    Returns:
        ``(parent, L, W)``: parent array (root -1), the layer distances, and W(T).
    """
    nodes = np.arange(geom.num_nodes)
    off = geom.offsets(np.zeros_like(nodes), nodes)
    dist = np.abs(off).sum(axis=1)
    L, W = layer_thresholds(np.bincount(dist, minlength=geom.diameter + 1), k)
    Ls = np.asarray(L)
    prev = Ls[np.searchsorted(Ls, dist, side="left") - 1]
    prev[0] = 0
    parent = geom.node(_shrink(off, prev))
    parent[0] = -1
    return parent, L, W


@register("k-sp-allreduce", "allreduce",
          "k-SP-allreduce on a torus: depth-<=k tree with shortest-path routed edges, symmetrised (2h rounds)")
def ksp_allreduce(num_ranks: int, k: int = 2, shape: Sequence[int] | None = None,
                  dims: int = 2) -> CollectivePattern:
    """k-SP-allreduce on an equal-sided torus: 2·d·n^d chunks, 2·h(T) steps with h(T) <= k.

    Raises:
        PatternError: k < 1, no such torus, unequal sides.
    """
    geom = TorusGeometry(parse_shape(num_ranks, shape, dims))
    if len(set(geom.shape)) != 1:
        raise PatternError(f"k-sp-allreduce needs equal sides, got {geom.shape}")
    parent, L, W = ksp_tree(geom, k)
    flows = symmetrize(tree_schedule(parent), torus_group(geom))
    return assemble(num_ranks, flows, name=f"k-sp-allreduce k={k} {'x'.join(map(str, geom.shape))}")

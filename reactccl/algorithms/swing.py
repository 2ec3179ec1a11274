"""Swing AllReduce on tori (De Sensi et al., NSDI 2024), bandwidth- and latency-optimal.

Partners: ρ(s) = Σ_{i=0..s} (-2)^i = 1, -1, 3, -5, 11, ...; at its σ-th step in a dimension
of size n a node at coordinate c pairs with ``c + ρ(σ)`` if c is even and ``c - ρ(σ)`` if
odd (mod n). A d-dimensional torus runs 2d collectives on 1/(2d) of the message each:
collective k < d starts on dimension k and moves to the next dimension every step
(:func:`~.torus_common.dimension_walk`); collective k + d mirrors it (ρ negated). Each
dimension of size n gets ceil(log2 n) steps.

* ``swing-b`` (bandwidth-optimal): reduce-scatter with the in-trees of
  :func:`~.torus_common.reach_intrees` (r sends to its peer q the blocks q is responsible
  for, each block at the latest step it qualifies), allgather mirrored. 2·Σ log2 n steps,
  Ψ = 1. Exact for every even side (a block is never sent twice). Odd side n (BASELINES.md
  "odd p", less certain in the sources): coordinates 0..n-2 run Swing on a ring of n-1
  (ρ mod n-1, routed on the real torus) while the last coordinate idles; the dimension's
  last step is a direct exchange in which the last coordinate gets the block partials it
  owns from, and sends each other block to, its owner — ceil(log2(n-1)) + 1 steps per
  dimension, still Ψ = 1 and verified exactly (3x3 ... 11x11, 7x4, 3x3x3), but the direct
  step is multi-hop and unbalanced (measured Ω: 5x5 1.72, 7x7 2.64, 9x9 2.16, 3x3 2.5).
* ``swing-l`` (latency-optimal): the whole part is exchanged and added every step,
  Σ log2 n steps when every side is a power of two; any other side first shrinks onto the
  power of two below it as Swing's reference code and MPICH do (fold the extra coordinates
  into their neighbours, Swing on the rest, copy the result back: 2 more steps per such side).

Example: ring of 8, ρ = 1, -1, 3: node 0 pairs with 1, then 7, then 3; node 1 with 0, 2, 6.

Source: BASELINES.md "Swing"; SP-allreduce §2.4, Appendix C.2-C.3.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pattern import CollectivePattern
from ..topology.torus import TorusGeometry
from .registry import register
from .shrink import pairs_fold, shrink_flows
from .torus_common import FlowArrays, assemble, dimension_walk, parse_shape, peer_instances_allreduce

__all__ = ["rho", "swing_peers", "swing_b", "swing_l"]


def rho(s: int) -> int:
    """ρ(s) = Σ_{i=0..s} (-2)^i."""
    return sum((-2) ** i for i in range(s + 1))


def _steps(n: int) -> int:
    return int(np.ceil(np.log2(n))) if n > 1 else 0


def _dim_steps(n: int, odd: bool) -> int:
    """Steps of one dimension of size n: ceil(log2 n); for odd n (swing-b) Swing on n-1
    coordinates plus one direct-exchange step of the last coordinate."""
    return _steps(n - 1) + 1 if odd and n % 2 else _steps(n)


def swing_peers(geom: TorusGeometry, collective: int, odd: bool = False) -> list[np.ndarray]:
    """Peer of every node at every step of Swing collective ``collective`` (0..2d-1),
    a list of arrays of shape ``(k, p)`` (k = 1, or n-1 at a direct-exchange step).

    ``odd=True`` (swing-b on a torus with odd sides): in a dimension of odd size n the
    coordinates 0..n-2 run Swing on a ring of n-1 (ρ mod n-1) while the last coordinate
    idles (its own peer); the dimension's last step is the direct exchange: the last
    coordinate has the n-1 others of its line as peers, each of them has the last one.
    """
    d = geom.d
    sign = 1 if collective < d else -1
    walk = dimension_walk([_dim_steps(n, odd) for n in geom.shape], collective % d)
    c = geom.coords()
    nodes = np.arange(geom.num_nodes)
    out = []
    for k, sigma in walk:
        n = geom.shape[k]
        extra = odd and n % 2 == 1
        m = n - 1 if extra else n
        if extra and sigma == _dim_steps(n, odd) - 1:  # direct exchange with the last coordinate
            rows = []
            for j in range(n - 1):
                cc = c.copy()
                cc[:, k] = np.where(c[:, k] == n - 1, j, n - 1)
                rows.append(geom.node(cc))
            out.append(np.stack(rows))
            continue
        cc = c.copy()
        par = np.where(c[:, k] % 2 == 0, 1, -1)
        cc[:, k] = (c[:, k] + par * sign * rho(sigma)) % m
        peer = geom.node(cc)
        if extra:
            peer = np.where(c[:, k] == n - 1, nodes, peer)
        out.append(peer[None, :])
    return out


@register("swing-b", "allreduce", "Swing bandwidth-optimal on a torus: 2d mirrored reduce-scatter/allgather collectives")
def swing_b(num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2) -> CollectivePattern:
    """Swing-B on the torus ``shape``: ``2 d p`` chunks, ``2 Σ ceil(log2 n_k)`` steps.

    Raises:
        PatternError: no torus of that shape; ValueError: a side below 3.
    """
    geom = TorusGeometry(parse_shape(num_ranks, shape, dims))
    return peer_instances_allreduce(num_ranks, geom, [swing_peers(geom, k, odd=True) for k in range(2 * geom.d)],
                                    name=f"swing-b {'x'.join(map(str, geom.shape))}")


def _alias_swing_l_flows(sides: Sequence[int]) -> FlowArrays:
    """Swing-L on a torus whose sides are powers of two (2 allowed), nodes numbered
    row-major: 2d collectives, one chunk each, whole chunk to the Swing partner every step."""
    d = len(sides)
    ac = np.stack(np.unravel_index(np.arange(int(np.prod(sides))), tuple(sides)), axis=1)
    me = np.ravel_multi_index(tuple(ac.T), tuple(sides))
    out: list[list[np.ndarray]] = [[], [], [], [], []]
    for col in range(2 * d):
        sign = 1 if col < d else -1
        for t, (k, sigma) in enumerate(dimension_walk([_steps(m) for m in sides], col % d)):
            cc = ac.copy()
            par = np.where(ac[:, k] % 2 == 0, 1, -1)
            cc[:, k] = (ac[:, k] + par * sign * rho(sigma)) % sides[k]
            peer = np.ravel_multi_index(tuple(cc.T), tuple(sides))
            for a, v in zip(out, (np.full(len(me), col), np.full(len(me), t), me, peer, np.zeros(len(me), np.int8))):
                a.append(v)
    return tuple(np.concatenate(a) for a in out)


@register("swing-l", "allreduce",
          "Swing latency-optimal on a torus: whole part exchanged every step; other sides shrink to a power of two")
def swing_l(num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2) -> CollectivePattern:
    """Swing-L on the torus ``shape``: 2d chunks, ``Σ log2 n_k`` steps when every side is a
    power of two. Any other side n shrinks onto the power of two below it as Swing's
    reference code does (:func:`~.shrink.pairs_fold`, MPICH's fold: even c < 2 rem adds its
    vector into c + 1 and sits out, Swing runs on the aliases with ρ and parity taken on the
    alias, the result is copied back), one fold and one unfold step per such side. Example
    6x8: the fold 0->1, 2->3 along dimension 0, 2 + 3 Swing steps on the 4x8 aliases
    {1, 3, 4, 5} x {0..7}, then 1->0, 3->2: 7 steps.

    Raises:
        PatternError: no torus of that shape; ValueError: a side below 3.
    """
    geom = TorusGeometry(parse_shape(num_ranks, shape, dims))
    folds = [pairs_fold(n) for n in geom.shape]
    flows = shrink_flows(geom, folds, 2 * geom.d, _alias_swing_l_flows([len(f[1]) for f in folds]))
    return assemble(num_ranks, flows, name=f"swing-l {'x'.join(map(str, geom.shape))}")

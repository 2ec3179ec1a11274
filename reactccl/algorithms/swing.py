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
  Ψ = 1. Exact for every even side (a block is never sent twice); odd sides are refused
  (the Swing paper handles odd p with an extra rank exchanging directly, not reproduced).
* ``swing-l`` (latency-optimal): the whole part is exchanged and added every step,
  Σ log2 n steps; exact only when every side is a power of two (otherwise refused).

Example: ring of 8, ρ = 1, -1, 3: node 0 pairs with 1, then 7, then 3; node 1 with 0, 2, 6.

Source: BASELINES.md "Swing"; SP-allreduce §2.4, Appendix C.2-C.3.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ..topology.torus import TorusGeometry
from .registry import register
from .torus_common import assemble, dimension_walk, parse_shape, peer_instances_allreduce, whole_vector_flows

__all__ = ["rho", "swing_peers", "swing_b", "swing_l"]


def rho(s: int) -> int:
    """ρ(s) = Σ_{i=0..s} (-2)^i."""
    return sum((-2) ** i for i in range(s + 1))


def _steps(n: int) -> int:
    return int(np.ceil(np.log2(n))) if n > 1 else 0


def swing_peers(geom: TorusGeometry, collective: int) -> list[np.ndarray]:
    """Peer of every node at every step of Swing collective ``collective`` (0..2d-1),
    a list of arrays of shape ``(1, p)``."""
    d = geom.d
    sign = 1 if collective < d else -1
    walk = dimension_walk([_steps(n) for n in geom.shape], collective % d)
    c = geom.coords()
    out = []
    for k, sigma in walk:
        cc = c.copy()
        par = np.where(c[:, k] % 2 == 0, 1, -1)
        cc[:, k] += par * sign * rho(sigma)
        out.append(geom.node(cc)[None, :])
    return out


def _geometry(num_ranks, shape, dims, what) -> TorusGeometry:
    shp = parse_shape(num_ranks, shape, dims)
    if any(n % 2 for n in shp):
        raise PatternError(f"{what}: odd sides are not supported (got {shp}); the Swing paper's odd-p "
                           f"scheme (an extra rank exchanging directly) is not reproduced here")
    return TorusGeometry(shp)


@register("swing-b", "allreduce", "Swing bandwidth-optimal on a torus: 2d mirrored reduce-scatter/allgather collectives")
def swing_b(num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2) -> CollectivePattern:
    """Swing-B on the torus ``shape``: ``2 d p`` chunks, ``2 Σ ceil(log2 n_k)`` steps.

    Raises:
        PatternError: no such torus, or an odd side.
    """
    geom = _geometry(num_ranks, shape, dims, "swing-b")
    return peer_instances_allreduce(num_ranks, geom, [swing_peers(geom, k) for k in range(2 * geom.d)],
                                    name=f"swing-b {'x'.join(map(str, geom.shape))}")


@register("swing-l", "allreduce", "Swing latency-optimal on a torus: whole part exchanged every step")
def swing_l(num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2) -> CollectivePattern:
    """Swing-L on the torus ``shape``: 2d chunks, ``Σ log2 n_k`` steps.

    Raises:
        PatternError: no such torus, or a side that is not a power of two (the recursive
            exchange would count contributions twice).
    """
    geom = _geometry(num_ranks, shape, dims, "swing-l")
    if any(n & (n - 1) for n in geom.shape):
        raise PatternError(f"swing-l: every side must be a power of two, got {geom.shape}")
    flows = whole_vector_flows([swing_peers(geom, k) for k in range(2 * geom.d)])
    return assemble(num_ranks, flows, name=f"swing-l {'x'.join(map(str, geom.shape))}")

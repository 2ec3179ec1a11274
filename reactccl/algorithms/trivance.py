"""Trivance AllReduce on tori (Juerss, Addanki, Schmid, SIGCOMM 2026): two peers per step.

In a dimension of size n there are K = ceil(log3 n) steps with distances d_s = 3^s, the
last one ceil((n - 3^(K-1)) / 2) (equal to 3^(K-1) when n = 3^K); at step s a node at c
works with c + d_s and c - d_s at once (one port each way). The message is split in d
parts; part i starts on dimension i and moves to the next dimension every step.

* ``trivance-l`` (latency-optimal): the whole part goes to both peers and the three values
  are added; Σ K steps. Exact only when every side is a power of three (the three groups
  combined are then disjoint); another side first shrinks onto the power of three below it
  (:mod:`.shrink`), 2 more steps per such side.
* ``trivance-b`` (bandwidth-optimal): reduce-scatter in-trees from the same peer sequence
  (:func:`~.torus_common.reach_intrees`), allgather mirrored, 2 Σ K steps, Ψ = 1. For
  n = 3^K this is the balanced-ternary scheme of the Trivance paper (r sends to r ± 3^s the
  blocks whose ternary digit s is ±1). For other n the authors' fix is not known here: we
  keep the distances above and send each block's partial once, at the latest step at which
  it belongs to a peer's share, which is exact (verified) but may differ from the artifact.
  A block in the shares of both peers of that step (a tie; common when n is not 3^K) goes
  to the less loaded of the two ports (:func:`~.torus_common.balanced_intrees`), so both
  ports carry the same number of blocks: on 6x6 node 0 sends 9 blocks each to 6 and 30 at
  step 0 (all 18 to 6 before), Q = 0.611 N and Ω = 1.023 (0.972 N and 1.628 with every tie
  on the "+" port); 16x16 Q = 0.828 N (0.973 N).

Example, n = 9: node 0 works with 1 and 8, then with 3 and 6; Trivance-L needs 2 steps.

Source: BASELINES.md "Trivance"; SP-allreduce §2.4, Appendix C.4.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pattern import CollectivePattern
from ..topology.torus import TorusGeometry
from .registry import register
from .shrink import shrink_flows, triples_fold
from .torus_common import assemble, dimension_walk, parse_shape, peer_instances_allreduce, whole_vector_flows

__all__ = ["trivance_distances", "trivance_peers", "trivance_b", "trivance_l"]


def trivance_distances(n: int) -> list[int]:
    """Step distances in a dimension of size n (see the module docstring)."""
    K = 0
    while 3 ** K < n:
        K += 1
    if K == 0:
        return []
    return [3 ** s for s in range(K - 1)] + [-(-(n - 3 ** (K - 1)) // 2)]


def trivance_peers(geom: TorusGeometry, part: int) -> list[np.ndarray]:
    """The two peers (+ then -) of every node at every step of part ``part`` (0..d-1),
    a list of arrays of shape ``(2, p)``."""
    dist = [trivance_distances(n) for n in geom.shape]
    walk = dimension_walk([len(x) for x in dist], part)
    c = geom.coords()
    out = []
    for k, sigma in walk:
        plus, minus = c.copy(), c.copy()
        plus[:, k] += dist[k][sigma]
        minus[:, k] -= dist[k][sigma]
        out.append(np.stack([geom.node(plus), geom.node(minus)]))
    return out


@register("trivance-b", "allreduce", "Trivance bandwidth-optimal on a torus: two peers per step, ternary reduce-scatter")
def trivance_b(num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2) -> CollectivePattern:
    """Trivance-B on the torus ``shape``: ``d p`` chunks, ``2 Σ ceil(log3 n_k)`` steps.

    Raises:
        PatternError: no torus of that shape; ValueError: a side below 3.
    """
    geom = TorusGeometry(parse_shape(num_ranks, shape, dims))
    return peer_instances_allreduce(num_ranks, geom, [trivance_peers(geom, i) for i in range(geom.d)],
                                    name=f"trivance-b {'x'.join(map(str, geom.shape))}", balanced=True)


@register("trivance-l", "allreduce",
          "Trivance latency-optimal on a torus: whole part to both peers each step; other sides shrink to a power of three")
def trivance_l(num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2) -> CollectivePattern:
    """Trivance-L on the torus ``shape``: d chunks, ``Σ log3 n_k`` steps when every side is a
    power of three.

    Another side n would add some contributions twice (the three groups a node combines
    overlap once 3^K exceeds n), so it first shrinks onto m = 3^floor(log3 n) coordinates
    (:func:`~.shrink.triples_fold`: groups of three fold both ends into their middle, one
    on each port, then pairs fold into one; one hop each), Trivance-L runs on the aliases,
    and the result is copied back: ``log3 m + 2`` steps for that side (n = 4..8: 3, n = 16: 4).
    The fold is ours, in the manner of the Swing/MPICH fold; the Trivance authors' own
    handling of such sides is not known here.

    Raises:
        PatternError: no torus of that shape; ValueError: a side below 3.
    """
    geom = TorusGeometry(parse_shape(num_ranks, shape, dims))
    folds = [triples_fold(n) for n in geom.shape]
    alias = TorusGeometry([len(f[1]) for f in folds])
    inner = whole_vector_flows([trivance_peers(alias, i) for i in range(alias.d)])
    return assemble(num_ranks, shrink_flows(geom, folds, geom.d, inner), name=f"trivance-l {'x'.join(map(str, geom.shape))}")

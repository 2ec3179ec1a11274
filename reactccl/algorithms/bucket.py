"""Bucket AllReduce on a torus: ring reduce-scatter along one dimension after another.

Balanced multiport Bucket (Jain & Sabharwal 2010; Sack & Gropp 2015; BASELINES.md): 2d
instances, one per (dimension i, direction ±), each on 1/(2d) of the message. Instance
(i, ±) runs stage s = 0..d-1 along dimension ``(i + s) mod d``: a ring reduce-scatter
among the n nodes of each line (direction + uses x -> x+1, direction - the reverse) on the
shard the node still owns; the allgather undoes the stages in reverse. On ``T_n^d`` this
takes 2d(n-1) rounds with Ψ = Θ = Ω = 1.

Per final block b (owned by node b at the end of the reduce-scatter) node r sends its
partial once: in the first stage s whose dimension k has ``r_k != b_k``, at ring step
``delta - 1`` with ``delta = (r_k - b_k) mod n_k`` (direction +), to ``r + e_k``. So on a
ring of 4 the block of node 0 travels 1 -> 2 -> 3 -> 0 in steps 0, 1, 2.

Source: BASELINES.md "Bucket"; SP-allreduce §2.4, Appendix C.1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pattern import CollectivePattern
from ..topology.torus import TorusGeometry
from .registry import register
from .torus_common import assemble, intree_allreduce, parse_shape

__all__ = ["bucket"]


def _bucket_trees(geom: TorusGeometry, start: int, sign: int) -> tuple[np.ndarray, np.ndarray, int]:
    """In-trees ``(parent, send_step)`` (shape ``(p, p)``: block, node) of one instance."""
    d, p = geom.d, geom.num_nodes
    c = geom.coords()
    blk, node = c[:, None, :], c[None, :, :]          # (b, 1, d), (1, r, d)
    differs = blk != node                              # (b, r, d)
    dims = [(start + s) % d for s in range(d)]
    offset = np.cumsum([0] + [geom.shape[k] - 1 for k in dims])
    parent = np.full((p, p), -1, dtype=np.int64)
    step = np.full((p, p), -1, dtype=np.int64)
    done = np.zeros((p, p), dtype=bool)
    for s, k in enumerate(dims):
        sel = differs[:, :, k] & ~done
        n = geom.shape[k]
        delta = (sign * (node[..., k] - blk[..., k])) % n
        bb, rr = np.nonzero(sel)
        step[bb, rr] = offset[s] + delta[bb, rr] - 1
        cc = c[rr].copy()
        cc[:, k] += sign
        parent[bb, rr] = geom.node(cc)
        done |= sel
    return parent, step, int(offset[-1])


@register("bucket", "allreduce",
          "Bucket on a torus: 2d ring reduce-scatter/allgather instances, one per dimension and direction")
def bucket(num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2) -> CollectivePattern:
    """Balanced multiport Bucket AllReduce on the torus ``shape``; ``2 d p`` chunks (one per
    instance and final block), ``2 sum(n_k - 1)`` steps.

    Raises:
        PatternError: no torus of that shape; ValueError: a side below 3.
    """
    geom = TorusGeometry(parse_shape(num_ranks, shape, dims))
    p = geom.num_nodes
    parts = []
    for i in range(geom.d):
        for j, sign in enumerate((1, -1)):
            parent, step, R = _bucket_trees(geom, i, sign)
            parts.append(intree_allreduce(parent, step, R, chunk_ids=np.arange(p) + (2 * i + j) * p))
    flows = tuple(np.concatenate(a) for a in zip(*parts))
    return assemble(num_ranks, flows, name=f"bucket {'x'.join(map(str, geom.shape))}")

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

__all__ = ["bucket", "bucket_trees"]


def bucket_trees(geom: TorusGeometry, start: int, sign: int,
                 blocks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """In-trees of one Bucket instance (stages start on dimension ``start``, ring direction
    ``sign``): ``(parent, send_step, R)`` with parent and send_step of shape ``(B, p)``
    (block, node; parent -1 at the block's owner) for ``blocks`` (default all p), R the
    number of reduce-scatter steps."""
    d, p = geom.d, geom.num_nodes
    c = geom.coords()
    blocks = np.arange(p) if blocks is None else np.asarray(blocks, dtype=np.int64).reshape(-1)
    B = len(blocks)
    blk, node = c[blocks][:, None, :], c[None, :, :]   # (B, 1, d), (1, r, d)
    differs = blk != node                              # (B, r, d)
    dims = [(start + s) % d for s in range(d)]
    offset = np.cumsum([0] + [geom.shape[k] - 1 for k in dims])
    parent = np.full((B, p), -1, dtype=np.int64)
    step = np.full((B, p), -1, dtype=np.int64)
    done = np.zeros((B, p), dtype=bool)
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
            parent, step, R = bucket_trees(geom, i, sign)
            parts.append(intree_allreduce(parent, step, R, chunk_ids=np.arange(p) + (2 * i + j) * p))
    flows = tuple(np.concatenate(a) for a in zip(*parts))
    return assemble(num_ranks, flows, name=f"bucket {'x'.join(map(str, geom.shape))}")

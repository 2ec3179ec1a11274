"""NCCL's tree AllReduce over servers: per channel a chain over NVLink inside each server whose
head joins a double binary tree over the servers, pipelined in NCCL's chunks.

Channel c's chain is its intra order (:mod:`.hier`): inside server s each GPU's parent is the one
before it, ``order[i-1]``, so the chain hangs from the head ``order[0]``, the GPU next to the
channel's NIC (``ncclTopoPreset``: ``tree.up = intra[i-1]``, ``tree.down[0] = intra[i+1]``). The
head of server s has as parent the head of server s's parent in the channel's tree over servers
(:func:`reactccl.algorithms.nccl_trees.dtree` over server indices, NCCL's ``ncclGetDtree(nNodes,
node)``): tree 0 for the first ceil(C/2) channels, the mirrored (even S) or shifted (odd S) tree 1
for the rest (:func:`reactccl.algorithms.hier.tree_channel_plan`). The head is both the link to
the parent server and to the child servers (NCCL's plain ``NCCL_TOPO_PATTERN_TREE``; the split
and balanced tree patterns, which hand child servers to the second GPU of the chain, are not
built). 4 servers x 2 GPUs, K = 2, channel 0 (tree 0 over servers is ``btree(4)``: server 2 under 0,
servers 1 and 3 under 2; heads are GPU 0 of each server)::

    server:        0          1          2          3
    chain:       0 <- 1     2 <- 3     4 <- 5     6 <- 7          (parent <- child: 1 sends up to 0)
    heads:       0 (root) <- 4 (server 2) <- 2 (server 1), 6 (server 3)

Each channel carries ``1/C`` of the message in ``slices`` pipeline slices (chunks ``c*slices + j``,
chunk graph c). A node sends slice j up at step ``height + j`` and a parent at depth d sends it
down at step ``D + d + j`` (D = the trees' depth, ``G - 1 + depth of the server tree``), the flat
``nccl-tree`` rule (:func:`reactccl.algorithms.tree.flat_nccl_tree`) on the combined tree, so with one
GPU per server and two channels the pattern is the flat one, flow for flow.

Source: NCCL ``src/graph/connect.cc`` (``ncclTopoPreset``, ``connectTrees``), ``src/graph/trees.cc``,
``src/enqueue.cc`` (the tree chunk); BASELINES.md "Servers".
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern
from .hier import ServerShape, tree_channel_plan
from .nccl_trees import dtree, tree_flows, tree_levels

__all__ = ["channel_parents", "hier_tree_allreduce"]


def channel_parents(shape: ServerShape, channels: int) -> np.ndarray:
    """Parent rank of every rank in every channel's tree, shape ``(C, N)`` int64, -1 at the root
    (module docstring)."""
    S, G, N = shape.servers, shape.gpus, shape.num_ranks
    server_parent = np.stack([p for p, _ in dtree(S)])                 # (2, S)
    tree, nic = tree_channel_plan(shape, channels)
    base = np.arange(S, dtype=np.int64)[:, None] * G                     # (S, 1)
    out = np.empty((channels, N), dtype=np.int64)
    for c in range(channels):
        order = shape.intra_order(int(nic[c]))
        ranks = base + order[None, :]                                    # (S, G): chain of each server
        par = np.empty((S, G), dtype=np.int64)
        par[:, 1:] = ranks[:, :-1]
        ps = server_parent[tree[c]]
        par[:, 0] = np.where(ps >= 0, ps * G + order[0], -1)
        out[c, ranks.ravel()] = par.ravel()
    return out


def hier_tree_allreduce(shape: ServerShape, channels: int, slices: int, name: str = "nccl-tree") -> CollectivePattern:
    """The hierarchical double binary tree AllReduce (module docstring) on ``shape.num_ranks`` ranks.

    Flows: ``C * slices * 2(N-1)``; steps ``2D + slices - 1``. Channels of equal (tree, NIC) share
    one tree, built once. The flows come out in (step, src, dst) order, ties in channel order, as
    :func:`reactccl.algorithms._build.make_pattern` sorts them, without sorting all of them: a
    channel's tree has at most one flow per (src, dst), so (step, the rank of (src, dst, channel)
    among the C * 2(N-1) tree edges) is a distinct key in a range of ``(2D + slices) * C * 2(N-1)``
    slots, and one scatter into those slots orders the flows.

    Args:
        shape: the servers (:func:`reactccl.algorithms.hier.server_shape`).
        channels: C >= 1.
        slices: pipeline slices per channel, >= 1.
        name: the pattern's name.

    Returns:
        An unverified pattern (:func:`reactccl.algorithms.generate` verifies it). N = 1: no flows.
    """
    C, K, N = int(channels), int(slices), shape.num_ranks
    parents = channel_parents(shape, C)
    uniq, which = np.unique(parents, axis=0, return_inverse=True)
    D = int(max(tree_levels(p)[0].max() for p in uniq))
    per_tree = [tree_flows(p, D) for p in uniq]
    st, s, d, o = (np.stack([per_tree[w][i] for w in np.ravel(which)]) for i in range(4))   # (C, E)
    E = st.shape[1]
    CE = C * E
    edge_rank = np.empty(CE, dtype=np.int64)                            # rank of (src, dst, channel)
    edge_rank[np.lexsort((np.arange(CE), d.ravel(), s.ravel()))] = np.arange(CE, dtype=np.int64)
    key = (st[:, None, :] + np.arange(K, dtype=np.int64)[None, :, None]) * CE + edge_rank.reshape(C, 1, E)
    slot = np.full(int(st.max(initial=0) + K) * CE, -1, dtype=np.int64)
    slot[key.ravel()] = np.arange(C * K * E, dtype=np.int64)             # generation index: (c, j, e)
    del key
    order = slot[slot >= 0]
    del slot
    c, rest = np.divmod(order, K * E)
    j, e = np.divmod(rest, E)
    del order, rest
    F = len(c)
    return CollectivePattern.from_arrays(
        "allreduce", N, np.full(C * K, 1.0 / (C * K)), np.repeat(np.arange(C, dtype=np.int64), K),
        st[c, e] + j, s[c, e], d[c, e], o[c, e], np.arange(F + 1, dtype=np.int64), c * K + j, name=name)

"""NCCL's tree AllReduce (``nccl-tree``): the double binary tree over ranks, or over servers.

Flat (one GPU per server, the default): tree 0 is NCCL's ``ncclGetBtree`` over ranks and tree 1
its mirror or shift (:mod:`.nccl_trees`, where the trees for n = 8 are drawn); each tree is one
chunk graph carrying half the message. On servers (``gpus=G`` > 1, or a channel count other than
2) each channel is a chain inside every server under a double binary tree over the servers
(:mod:`.hier_tree`). Slices follow NCCL's tree chunk size where the message size is known.

Source: NCCL ``src/graph/trees.cc``, ``src/graph/connect.cc``, ``src/enqueue.cc``; Sanders, Speck
& Träff (2009); REACT §4.3, A.1.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ._build import check_int_option, make_pattern
from .hier import resolve_channels, server_shape
from .hier_tree import hier_tree_allreduce
from .nccl_chunks import tree_slices
from .nccl_trees import btree, dtree, tree_flows, tree_levels
from .registry import register

__all__ = ["btree", "dtree", "tree_levels", "tree_flows", "nccl_tree", "flat_nccl_tree"]


def _slices(slices: int | None, size: float | None, n: int, channels: int, gpus: int) -> int:
    """Slices per channel: ``slices`` if given, else NCCL's rule for ``size`` bytes, else 1."""
    if slices is not None:
        return check_int_option("slices", slices)
    if size is None:
        return 1
    try:
        return tree_slices(size, n, channels, gpus)
    except ValueError as e:
        raise PatternError(str(e)) from None


@register("nccl-tree", "allreduce",
          "NCCL double binary tree (trees.cc): two trees, half the message each, pipelined in NCCL's "
          "chunks; reduce up, broadcast down; with gpus=G a chain per server under a tree over "
          "servers, channels spread over the NICs")
def nccl_tree(n: int, slices: int | None = None, size: float | None = None, servers: int | None = None,
              gpus: int | None = None, nics: int | None = None, channels: int | None = None,
              hierarchy: Literal["servers", "flat"] = "servers") -> CollectivePattern:
    """NCCL's tree AllReduce on ``n`` ranks: flat (:func:`flat_nccl_tree`) unless the ranks sit on
    servers of several GPUs, then NCCL's hierarchical tree (:func:`reactccl.algorithms.hier_tree.
    hier_tree_allreduce`).

    Args:
        n: ranks (>= 1).
        slices: pipeline slices per channel (>= 1), or None for NCCL's rule on ``size``
            (:mod:`reactccl.algorithms.nccl_chunks`, depth ``G - 1 + log2i(S)``, C channels).
        size: the message in bytes, for NCCL's rule; ignored when ``slices`` is given.
        servers, gpus: S and G with S x G = n (:func:`reactccl.algorithms.hier.server_shape`);
            neither: one GPU per server.
        nics: K NICs per server, 1..G (default G).
        channels: C (default 2K: each NIC carries a tree-0 and a tree-1 channel); channel c uses
            tree 0 for c < ceil(C/2), else tree 1 (:mod:`reactccl.algorithms.hier`).
        hierarchy: ``"servers"`` (default) builds on the server shape; ``"flat"`` the flat tree
            over ranks whatever the server options (it takes no ``channels``).

    With G = 1 and C = 2 (the defaults without server options) the pattern is the flat one,
    exactly.

    Raises:
        PatternError: on a bad option, naming it.
    """
    n = check_int_option("n", n)
    shape = server_shape(n, servers, gpus, nics)
    if hierarchy == "flat":
        if channels is not None:
            raise PatternError("channels: hierarchy=flat builds the flat tree (2 chunk graphs); drop channels")
        return flat_nccl_tree(n, slices, size)
    C = resolve_channels(shape, channels, tree=True)
    if shape.gpus == 1 and C == 2:
        return flat_nccl_tree(n, slices, size)
    K = _slices(slices, size, n, C, shape.gpus)
    name = f"nccl-tree(servers={shape.servers},gpus={shape.gpus},nics={shape.nics},channels={C},slices={K})"
    return hier_tree_allreduce(shape, C, K, name=name)


def flat_nccl_tree(n: int, slices: int | None = None, size: float | None = None) -> CollectivePattern:
    """NCCL's double binary tree AllReduce on ``n`` ranks.

    Chunk graph g (0, 1) is tree g and carries half the message, in ``slices`` chunks of
    size ``1/(2*slices)`` (chunk id ``g*slices + j``). In each tree, slice j reduces up the
    tree (a node sends at step ``height + j``) and is then copied down (a parent at depth d
    sends at step ``D + d + j``, D = the tree's depth), so slice j runs one step behind
    slice j-1 and the pattern takes ``2*D + slices - 1`` steps (n = 16: D = 4, 8 steps
    with one slice). n = 1 gives no flows.

    Default slicing is NCCL's: with ``slices`` not given and the message ``size`` known,
    ``slices = tree_slices(size, n)`` (:mod:`reactccl.algorithms.nccl_chunks`: NCCL's tree
    chunk of 512 KiB, halved down to 32 KiB while each tree would get fewer than 8, 4, 1 x
    depth chunks; one slice per chunk): 16 ranks, 128 MiB: 128 slices of 512 KiB; 8 ranks,
    20 MB: 39 slices of 256 KiB; up to 64 KiB: 1. ``perf``, ``simulate`` and
    ``run_simulation`` pass the size (:func:`reactccl.algorithms.generate`'s ``size``).
    Without a size (``pattern generate``, the runtime, whose ``pipeline_bytes`` cuts chunks
    into parts itself) the pattern has 1 slice per tree. The REACT paper's runs use 1 slice
    (``slices=1``, given by name in ``experiments`` and the REACT benches).

    Args:
        n: ranks (>= 1).
        slices: pipeline slices per tree (>= 1), or None for NCCL's rule.
        size: the message in bytes (nccl-tests' size), for NCCL's rule; ignored when
            ``slices`` is given.

    Raises:
        PatternError: on a bad ``n``, ``slices`` or ``size``.
    """
    n = check_int_option("n", n)
    K = _slices(slices, size, n, 2, 1)
    (p0, _), (p1, _) = dtree(n)
    D = int(tree_levels(p0)[0].max())
    parts = [tree_flows(p, D) for p in (p0, p1)]
    steps, srcs, dsts, ops, chunks = [], [], [], [], []
    for g, (st, s, d, o) in enumerate(parts):
        for j in range(K):
            steps.append(st + j)
            srcs.append(s)
            dsts.append(d)
            ops.append(o)
            chunks.append(np.full(len(st), g * K + j, dtype=np.int64))
    step = np.concatenate(steps)
    return make_pattern(
        "allreduce", n, np.full(2 * K, 1.0 / (2 * K)), np.repeat([0, 1], K), step,
        np.concatenate(srcs), np.concatenate(dsts), np.concatenate(ops),
        np.ones(len(step), dtype=np.int64), np.concatenate(chunks),
        name="nccl-tree" if K == 1 else f"nccl-tree(slices={K})")

"""NCCL's double binary tree AllReduce (``nccl-tree``), built as NCCL's ``src/graph/trees.cc`` does.

Tree 0 is NCCL's ``ncclGetBtree``: for rank r > 0 with lowest set bit ``b``, the parent is
``(r ^ b) | (b << 1)``, or ``r ^ b`` when that is >= n; rank 0 is the root and its only child is
the largest power of two below n; odd ranks are leaves. Tree 1 is ``ncclGetDtree``'s second tree:
the mirror ``x -> n-1-x`` of tree 0 for even n, the shift ``x -> x+1 mod n`` for odd n. For n = 8::

    tree 0 (root 0)            tree 1 (mirror, root 7)
          0                          7
          |                          |
          4                          3
        /   \\                      /   \\
       2     6                    1     5
      / \\   / \\                  / \\   / \\
     1   3 5   7                0   2 4   6

Slices follow NCCL's tree chunk size where the message size is known (:func:`nccl_tree`).

Source: NCCL ``src/graph/trees.cc``, ``src/enqueue.cc``; Sanders, Speck & Träff (2009); REACT §4.3, A.1.
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ._build import check_int_option, make_pattern
from .nccl_chunks import tree_slices
from .registry import register

__all__ = ["btree", "dtree", "tree_levels", "nccl_tree"]


def btree(n: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's binary tree over ranks ``0..n-1`` (``ncclGetBtree``), root 0.

    Returns:
        ``(parent, children)``: ``parent`` shape ``(n,)`` int64 with -1 for the root;
        ``children`` shape ``(n, 2)`` int64, NCCL's ``(down0, down1)`` with -1 for none.

    Raises:
        PatternError: if ``n`` is not an integer >= 1.
    """
    n = check_int_option("n", n)
    r = np.arange(n, dtype=np.int64)
    bit = r & -r                                   # lowest set bit (0 for rank 0)
    up = (r ^ bit) | (bit << 1)
    parent = np.where(up >= n, r ^ bit, up)
    parent[0] = -1
    low = bit >> 1
    down0 = np.where(low > 0, r - low, -1)
    down1 = np.where(low > 0, r + low, -1)
    while True:                                    # halve the step until rank + low < n
        over = down1 >= n
        if not over.any():
            break
        low = np.where(over, low >> 1, low)
        down1 = np.where(over, np.where(low > 0, r + low, -1), down1)
    down0[0] = -1
    down1[0] = (1 << ((n - 1).bit_length() - 1)) if n > 1 else -1
    return parent, np.stack([down0, down1], axis=1)


def dtree(n: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """NCCL's double binary tree (``ncclGetDtree``): ``((parent0, children0), (parent1, children1))``.

    Tree 1 is tree 0 mirrored (``x -> n-1-x``, root n-1) for even n and shifted
    (``x -> (x+1) mod n``, root 1 mod n) for odd n; shapes as in :func:`btree`.
    """
    parent0, children0 = btree(n)
    r = np.arange(n, dtype=np.int64)
    if n % 2 == 0:
        pos = n - 1 - r                            # tree-0 position this rank plays in tree 1

        def back(x):
            return np.where(x < 0, -1, n - 1 - x)
    else:
        pos = (r - 1) % n

        def back(x):
            return np.where(x < 0, -1, (x + 1) % n)
    return (parent0, children0), (back(parent0[pos]), back(children0[pos]))


def tree_levels(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth (root 0) and height (leaves 0) of every node of a tree given by parents.

    Args:
        parent: shape ``(n,)``, -1 for the single root.

    Returns:
        ``(depth, height)``, each shape ``(n,)`` int64.

    Raises:
        PatternError: if ``parent`` has not exactly one root or contains a cycle.
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = len(parent)
    roots = np.flatnonzero(parent < 0)
    if len(roots) != 1:
        raise PatternError(f"parent: a tree needs exactly one root (-1), found {roots.tolist()}")
    depth = np.zeros(n, dtype=np.int64)
    anc = parent.copy()
    for _ in range(n):                              # walk every node up one level per round
        live = anc >= 0
        if not live.any():
            break
        depth += live
        anc = np.where(live, parent[np.maximum(anc, 0)], -1)
    else:
        raise PatternError("parent: the parent array contains a cycle")
    height = np.zeros(n, dtype=np.int64)
    for d in range(int(depth.max()), 0, -1):
        nodes = np.flatnonzero(depth == d)
        np.maximum.at(height, parent[nodes], height[nodes] + 1)
    return depth, height


def _tree_flows(parent: np.ndarray, depth_total: int):
    """Reduce-up and broadcast-down flows of one tree: ``(step, src, dst, op)`` arrays.

    A node sends its partial sum to its parent at step = its height (leaves at 0, so the
    parent has every child's data by then); a parent at depth d sends the result to its
    children at step ``depth_total + d``.
    """
    depth, height = tree_levels(parent)
    kids = np.flatnonzero(parent >= 0)
    par = parent[kids]
    step = np.concatenate([height[kids], depth_total + depth[par]])
    src = np.concatenate([kids, par])
    dst = np.concatenate([par, kids])
    op = np.concatenate([np.zeros(len(kids), np.int8), np.ones(len(kids), np.int8)])
    return step, src, dst, op


@register("nccl-tree", "allreduce",
          "NCCL double binary tree (trees.cc): two trees, half the message each, pipelined in NCCL's "
          "chunks; reduce up, broadcast down")
def nccl_tree(n: int, slices: int | None = None, size: float | None = None) -> CollectivePattern:
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
    if slices is not None:
        K = check_int_option("slices", slices)
    elif size is not None:
        try:
            K = tree_slices(size, n)
        except ValueError as e:
            raise PatternError(str(e)) from None
    else:
        K = 1
    (p0, _), (p1, _) = dtree(n)
    D = int(tree_levels(p0)[0].max())
    parts = [_tree_flows(p, D) for p in (p0, p1)]
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

"""NCCL's double binary tree over indices 0..n-1 (``src/graph/trees.cc``), and the flows of one tree.

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

The ``nccl-tree`` generator (:mod:`.tree`) runs one tree over ranks per chunk graph, or, on
servers, one over server indices (:mod:`.hier_tree`).

Source: NCCL ``src/graph/trees.cc``; Sanders, Speck & Träff (2009); REACT §4.3, A.1.
"""

from __future__ import annotations

import numpy as np

from ..pattern import PatternError
from ._build import check_int_option

__all__ = ["btree", "dtree", "tree_levels", "tree_flows"]


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


def tree_flows(parent: np.ndarray, depth_total: int):
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

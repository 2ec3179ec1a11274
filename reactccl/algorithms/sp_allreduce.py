"""SP-allreduce: one shortest-path tree, symmetrised under a group of network automorphisms.

Generators (all AllReduce, one chunk per group element and base tree):

* ``sp-allreduce`` — equal-sided torus ``T_n^d``: a BFS tree rooted at 0 and its images under
  Γ = {u -> x + ε ρ^j(u)} (2·d·n^d chunks), ``H = d·floor(n/2)`` reduce rounds then H
  broadcast rounds (§3.1). Rectangular ``m x n``: Γ = translations and the global reflection
  and two BFS trees (4mn chunks) chosen so every round loads horizontal and vertical links
  alike (§6.1; construction in :func:`rectangular_trees`). Ψ = Θ = Ω = 1 in 2H rounds.
* ``sp-allreduce-2h1`` — even n: the 2H-1-round schedule of Appendix A.5 (a BFS forest
  rooted at two adjacent nodes, one exchange round, broadcast back), symmetrised under Γ.
* ``sp-hyperx`` — HyperX ``n x n``: the depth-2 windmill tree under translations and the
  four 90° rotations (4n² chunks, §6.2).
* ``sp-spineleaf`` — spine-leaf with q hosts per leaf: the star on the hosts (every host's
  tree edge is its shortest route to the root) under h_{i,j} -> h_{i+a,j+b} (§6.3).

Small instance: the BFS tree of node 0 on the 4 x 4 torus (node = 4*row + col; ``a<-b``:
b's parent is a)::

    0 <- 1 <- 2     0 <- 3     0 <- 4 <- 8     0 <- 12     1 <- 5 <- 9     1 <- 13 <- 14 ...

H = 4: the depth-4 node 10 sends in round 1, the root gets its last partials in round 4 and
the result flows back down in rounds 5..8; 64 images of this tree, one per chunk.

Source: SP-allreduce (arXiv 2610.16387) §3.1, §6, Appendix A.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ..topology.torus import HyperXGeometry, TorusGeometry
from .registry import register
from .torus_common import assemble, bfs_tree, parse_shape, symmetrize, torus_group, tree_schedule

__all__ = ["sp_allreduce", "sp_allreduce_2h1", "sp_hyperx", "sp_spineleaf", "rectangular_trees",
           "windmill_tree", "hyperx_group"]


def rectangular_trees(geom: TorusGeometry) -> tuple[np.ndarray, np.ndarray]:
    """Two BFS trees of the 2-D torus ``m x n`` rooted at (0, 0) whose families under
    translations and reflection load every link equally in every round (§6.1).

    Under that group every horizontal directed link sees, per round, as many chunks as the
    two base trees have horizontal edges in that round (likewise vertical), so Ω = 1 iff at
    every depth h the two trees together use as many horizontal as vertical edges. Nodes on
    the axis ``x = 0`` must go vertically, nodes on ``y = 0`` horizontally; each other node
    may go either way in each tree. With X_h, Y_h those forced counts and f_h free nodes at
    depth h, exactly ``k_h = X_h - Y_h + f_h`` of the ``2 f_h`` free choices go horizontal.

    Returns:
        ``(parent_a, parent_b)``, each shape ``(mn,)``, root -1.

    Raises:
        PatternError: not 2-D, or some depth has |X_h - Y_h| > f_h (no such pair exists).
    """
    if geom.d != 2:
        raise PatternError(f"rectangular SP-allreduce needs a 2-D torus, got shape {geom.shape}")
    nodes = np.arange(geom.num_nodes)
    off = geom.offsets(np.zeros_like(nodes), nodes)
    depth = np.abs(off).sum(axis=1)
    horiz = np.zeros((2, len(nodes)), dtype=bool)  # per tree: parent along dimension 0?
    forced_h = (off[:, 1] == 0) & (off[:, 0] != 0)
    forced_v = off[:, 0] == 0
    free = (off[:, 0] != 0) & (off[:, 1] != 0)
    horiz[:, forced_h] = True
    for h in range(1, geom.diameter + 1):
        at = depth == h
        fr = np.flatnonzero(at & free)
        k = int((at & forced_v).sum() - (at & forced_h).sum() + len(fr))
        if not 0 <= k <= 2 * len(fr):
            raise PatternError(f"rectangular SP-allreduce on {geom.shape}: depth {h} cannot be balanced "
                               f"({int((at & forced_v).sum())} forced vertical, "
                               f"{int((at & forced_h).sum())} forced horizontal, {len(fr)} free)")
        slots = np.zeros(2 * len(fr), dtype=bool)
        slots[:k] = True
        horiz[0, fr] = slots[0::2]
        horiz[1, fr] = slots[1::2]
    out = []
    c = geom.coords(nodes)
    for t in range(2):
        dim = np.where(horiz[t], 0, 1)
        cc = c.copy()
        cc[nodes, dim] -= np.sign(off[nodes, dim])
        par = geom.node(cc)
        par[0] = -1
        out.append(par)
    return out[0], out[1]


@register("sp-allreduce", "allreduce",
          "SP-allreduce on a torus: BFS tree(s) symmetrised under torus automorphisms, 2H rounds, Ψ=Θ=Ω=1")
def sp_allreduce(num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2) -> CollectivePattern:
    """SP-allreduce on the torus ``shape`` (default: equal-sided with ``dims`` dimensions).

    Equal sides: one BFS tree (:func:`bfs_tree`) under Γ, ``2 d n^d`` chunks. Unequal sides
    (2-D only): two BFS trees (:func:`rectangular_trees`) under translations and reflection,
    ``4 m n`` chunks. Both take ``2H`` steps (H = the torus diameter).

    Raises:
        PatternError: no torus of that shape, a side below 3, unequal sides in 3+ dimensions.
    """
    geom = TorusGeometry(parse_shape(num_ranks, shape, dims))
    label = "x".join(map(str, geom.shape))
    if len(set(geom.shape)) == 1:
        flows = symmetrize(tree_schedule(bfs_tree(geom), geom.diameter), torus_group(geom))
    else:
        perms = torus_group(geom, reflect=True, shifts=False)
        a, b = rectangular_trees(geom)
        fa = symmetrize(tree_schedule(a, geom.diameter), perms)
        fb = symmetrize(tree_schedule(b, geom.diameter), perms, chunk_offset=len(perms))
        flows = tuple(np.concatenate([x, y]) for x, y in zip(fa, fb))
    return assemble(num_ranks, flows, name=f"sp-allreduce {label}")


def _forest_2h1(geom: TorusGeometry) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Base schedule of Appendix A.5 for one chunk: roots a = 0 and b = e_0."""
    nodes = np.arange(geom.num_nodes)
    a, b = 0, int(geom.node(np.eye(geom.d, dtype=np.int64)[0]))
    da, db = geom.distance(np.full(len(nodes), a), nodes), geom.distance(np.full(len(nodes), b), nodes)
    root = np.where(da < db, a, b)
    off = geom.offsets(root, nodes)
    k = np.argmax(np.abs(off), axis=1)
    c = geom.coords(nodes)
    c[nodes, k] -= np.sign(off[nodes, k])
    parent = geom.node(c)
    parent[[a, b]] = -1
    depth = np.minimum(da, db)
    R = int(depth.max())  # H - 1
    u = np.flatnonzero(parent >= 0)
    step = np.concatenate([R - depth[u], [R, R], R + depth[u]])
    src = np.concatenate([u, [a, b], parent[u]])
    dst = np.concatenate([parent[u], [b, a], u])
    op = np.concatenate([np.zeros(len(u) + 2, np.int8), np.ones(len(u), np.int8)])
    return step, src, dst, op


@register("sp-allreduce-2h1", "allreduce",
          "SP-allreduce variant for even n: BFS forest on two adjacent roots + exchange, 2H-1 rounds (App. A.5)")
def sp_allreduce_2h1(num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2) -> CollectivePattern:
    """The 2H-1-round fully bandwidth-optimal schedule for even n (Appendix A.5).

    Raises:
        PatternError: odd or unequal sides (the construction needs joint eccentricity H-1).
    """
    geom = TorusGeometry(parse_shape(num_ranks, shape, dims))
    if len(set(geom.shape)) != 1 or geom.shape[0] % 2:
        raise PatternError(f"sp-allreduce-2h1 needs an equal-sided torus with even n, got {geom.shape}")
    flows = symmetrize(_forest_2h1(geom), torus_group(geom))
    return assemble(num_ranks, flows, name=f"sp-allreduce-2h1 {'x'.join(map(str, geom.shape))}")


def windmill_tree(geom: HyperXGeometry) -> np.ndarray:
    """The windmill tree of HyperX n x n rooted at (0, 0) (§6.2, Fig. 1b): the cross (row 0
    and column 0) hangs off the root; a node with signed offsets (sx, sy), both nonzero,
    hangs off (x, 0) when sx·sy < 0 and off (0, y) otherwise. Offsets lie in (-n/2, n/2].

    Returns: parent array, shape ``(n*n,)``, root -1.
    """
    if geom.d != 2:
        raise PatternError(f"windmill tree: HyperX must be 2-D, got {geom.shape}")
    nodes = np.arange(geom.num_nodes)
    off = geom.offsets(np.zeros_like(nodes), nodes)
    c = geom.coords(nodes)
    col = off[:, 0] * off[:, 1] < 0
    parent = np.where(col, geom.node(np.stack([c[:, 0], 0 * c[:, 1]], 1)),
                      geom.node(np.stack([0 * c[:, 0], c[:, 1]], 1)))
    cross = (off[:, 0] == 0) | (off[:, 1] == 0)
    parent[cross] = 0
    parent[0] = -1
    return parent


def hyperx_group(geom: HyperXGeometry) -> np.ndarray:
    """Translations and the four 90° rotations (x, y) -> (-y, x) of HyperX n x n,
    shape ``(4 n², n²)``, element index ``k * n² + t`` (rotation k, translation t)."""
    c = geom.coords()
    out = []
    img = c.copy()
    for _ in range(4):
        out.append(geom.node(img[None, :, :] + c[:, None, :]))
        img = np.stack([-img[:, 1], img[:, 0]], axis=1)
    return np.concatenate(out, axis=0)


@register("sp-hyperx", "allreduce", "SP-allreduce on HyperX n x n: windmill tree under translations and rotations")
def sp_hyperx(num_ranks: int, shape: Sequence[int] | None = None) -> CollectivePattern:
    """SP-allreduce on HyperX ``n x n``: 4n² chunks, 2 + 2 rounds (§6.2).

    Raises:
        PatternError: num_ranks not n² or n < 3.
    """
    shape = parse_shape(num_ranks, shape, 2)
    if shape[0] != shape[1] or shape[0] < 3:
        raise PatternError(f"sp-hyperx needs n x n with n >= 3, got {shape}")
    geom = HyperXGeometry(shape)
    flows = symmetrize(tree_schedule(windmill_tree(geom)), hyperx_group(geom))
    return assemble(num_ranks, flows, name=f"sp-hyperx {shape[0]}x{shape[1]}")


@register("sp-spineleaf", "allreduce", "SP-allreduce on spine-leaf: host star under leaf/host translations")
def sp_spineleaf(num_ranks: int, q: int | None = None, tree: Literal["star", "relay"] = "star") -> CollectivePattern:
    """SP-allreduce on a spine-leaf fabric with ``q`` hosts per leaf (``l = num_ranks / q``
    leaves, q spines): a base tree rooted at h_{0,0} and its p images under the group
    h_{i,j} -> h_{i+a, j+b} (§6.3), one chunk of N/p per image.

    ``tree="star"`` (default, the paper's "shortest-path base tree on the hosts": every host
    hangs directly off the root, so every tree edge is a shortest route) gives 1 reduce and
    1 broadcast round. ``tree="relay"`` hangs the hosts of leaf j != 0 off h_{0,j}, which
    hangs off the root: fewer spine crossings, 2 + 2 rounds, not a shortest-path tree.

    Measured with :func:`reactccl.cost.deficiency` on spine-leaf 4 leaves x 4 hosts (p = 16,
    |E| = 4p = 64 links counting host up/down and leaf-spine both ways)::

        schedule      S   Vol_phys   Theta  Omega   Q
        star          2   108 N      3.6    1.111   1.875 N
        relay         4    72 N      2.4    1.667   1.875 N
        Bucket/Swing  12/8 90 N      3.0    1.333   1.875 N

    Θ and Ω are not 1 on spine-leaf for any schedule: a host has one link, so every
    transmission takes >= 2 hops, and the spine tier doubles |E| without adding injection
    bandwidth. What is optimal is Q = 2(p-1)/p · N, the bytes each host's single uplink must
    carry (so ΨΘΩ >= |E|/p = 4 in eq. 6): the star reaches it (in every round the host
    uplinks are the most loaded links, the leaf-spine links carry less) in the fewest rounds,
    2. Its larger Vol_phys only lands on the underused spine tier; the relay tree cuts it but
    pays 2 more rounds for the same Q, so the star is the one the experiments use.

    Raises:
        PatternError: q missing or not dividing num_ranks; unknown ``tree``.
    """
    if q is None or q < 1 or num_ranks % q:
        raise PatternError(f"sp-spineleaf: q (hosts per leaf) must divide num_ranks={num_ranks}, got {q}")
    if num_ranks < 2:
        raise PatternError("sp-spineleaf: needs at least 2 hosts")
    if tree not in ("star", "relay"):
        raise PatternError(f"sp-spineleaf: tree must be 'star' or 'relay', got {tree!r}")
    leaves = num_ranks // q
    i, j = np.arange(num_ranks) % q, np.arange(num_ranks) // q
    parent = np.zeros(num_ranks, dtype=np.int64)
    if tree == "relay":
        parent = np.where((j > 0) & (i > 0), j * q, 0)  # h_{i,j} -> h_{0,j} -> h_{0,0}
    parent[0] = -1
    a, b = i, j  # group element (a, b)
    perms = ((j[None, :] + b[:, None]) % leaves) * q + (i[None, :] + a[:, None]) % q
    flows = symmetrize(tree_schedule(parent), perms)
    return assemble(num_ranks, flows, name=f"sp-spineleaf q={q} leaves={leaves}" + ("" if tree == "star" else " relay"))

"""Compact schedules: one transversal of a translation-invariant torus schedule.

SP-allreduce, k-SP, Bucket, Swing and Trivance on a torus map to themselves under
translations (all of them, or for Swing the even ones, since a node's partner depends on
the parity of its coordinate). Every flow of such a schedule is then a translate of
exactly one flow of a *transversal*: for the tree families the flows of the trees of the
point group (translation x = 0; SP's ``2d`` trees out of ``2 d n^d``), for the in-tree
instances the flows that carry the blocks owned by one period cell of nodes (block 0 for
Bucket and Trivance, blocks ``{0,1}^d`` for Swing). On 64x64 that is 32,760 flows in
place of 134 million, and everything the α-β model needs (per-round link loads, route
lengths, volumes) follows from it exactly: see :mod:`reactccl.cost.symmetric`.

A :class:`CompactSchedule` is checked when it is built, at a cost linear in its size:

* tree families: the base tree is a tree (checked by :func:`~.torus_common.tree_schedule`) with a
  schedule of ``2h`` rounds, and each point-group element is a torus automorphism (a
  permutation mapping neighbours to neighbours); the image of a tree schedule under an
  automorphism is a correct AllReduce of its chunk, and translations add nothing new.
* in-tree instances: every node but the block's owner sends its partial once, in
  ``0..R-1``, to a parent that is the owner or sends strictly later (so each
  contribution reaches the owner exactly once and the mirrored allgather is exact), and
  the peer sequence commutes with the period translations (so the translates of these
  blocks' trees are the other blocks' trees).

The full-pattern generators stay the reference: tests check that the compact form gives
the same deficiency as the materialised, exactly verified pattern on small tori.

Source: SP-allreduce §3 (symmetrisation), §7; DESIGN.md ("Fast paths keep their references").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from ..pattern import PatternError
from ..topology.torus import TorusGeometry
from .bucket import bucket_trees
from .kspt import ksp_tree, layer_thresholds
from .registry import checked_options
from .swing import swing_peers
from .torus_common import balanced_intrees, bfs_tree, mirror_allgather, parse_shape, reach_intrees, torus_group, tree_schedule
from .trivance import trivance_peers

__all__ = ["CompactSchedule", "compact_schedule", "COMPACT_GENERATORS", "check_intrees"]


@dataclass(frozen=True)
class CompactSchedule:
    """A translation-invariant AllReduce on a torus, stored as a transversal of its flows.

    Attributes:
        name: generator name and shape, e.g. ``"bucket 64x64"``.
        geom: the torus.
        period: the schedule maps to itself under ``u -> u + period[k] e_k``; each
            ``period[k]`` divides ``geom.shape[k]``.
        step, src, dst: the transversal's flows, each shape ``(F,)`` (step 0 = round 1).
        weight: fraction of the message each flow carries, shape ``(F,)``.
        num_chunks: chunks of the full schedule.
    """

    name: str
    geom: TorusGeometry
    period: tuple[int, ...]
    step: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    num_chunks: int

    @property
    def copies(self) -> int:
        """Translates of the transversal in the full schedule: ``prod(shape / period)``."""
        return int(np.prod(np.asarray(self.geom.shape) // np.asarray(self.period)))

    @property
    def num_flows(self) -> int:
        """Flows of the full schedule (one chunk per flow, unpacked)."""
        return self.copies * len(self.step)


def _cell_nodes(geom: TorusGeometry, period: Sequence[int]) -> np.ndarray:
    """Nodes whose coordinates lie in ``[0, period[k])`` for every k (one period cell)."""
    return geom.node(np.array(list(product(*(range(t) for t in period))), dtype=np.int64))


def _check_automorphisms(geom: TorusGeometry, perms: np.ndarray) -> None:
    nodes = np.arange(geom.num_nodes)
    nb = np.sort(geom.neighbours(), axis=1)
    for g, perm in enumerate(perms):
        if not (np.sort(perm) == nodes).all():
            raise PatternError(f"point-group element {g} is not a permutation of the {geom.num_nodes} nodes")
        if not (np.sort(perm[geom.neighbours()], axis=1) == nb[perm]).all():
            raise PatternError(f"point-group element {g} is not a torus automorphism")


def _tree_family(name: str, geom: TorusGeometry, parent: np.ndarray, rounds: int | None = None) -> CompactSchedule:
    """Trees of the point group: the transversal of a tree symmetrised under Γ (§3.1)."""
    perms = torus_group(geom, translations=False)
    _check_automorphisms(geom, perms)
    step, src, dst, _ = tree_schedule(parent, rounds)  # raises on a cycle or a second root
    G = perms.shape[0] * geom.num_nodes
    return CompactSchedule(name, geom, (1,) * geom.d, np.tile(step, len(perms)), perms[:, src].reshape(-1),
                           perms[:, dst].reshape(-1), np.full(len(step) * len(perms), 1.0 / G), G)


def check_intrees(parent: np.ndarray, send_step: np.ndarray, rounds: int, blocks: np.ndarray) -> None:
    """Structural check of reduce-scatter in-trees (see the module docstring).

    Args:
        parent, send_step: shape ``(B, p)``; row j is block ``blocks[j]``'s in-tree.
        rounds: R, the reduce-scatter steps.

    Raises:
        PatternError: naming the block and node where the tree breaks.
    """
    B, p = parent.shape
    rows = np.arange(B)
    if (parent[rows, blocks] != -1).any():
        j = int(np.flatnonzero(parent[rows, blocks] != -1)[0])
        raise PatternError(f"block {blocks[j]}: its owner sends its partial to node {parent[j, blocks[j]]}")
    own = np.zeros((B, p), dtype=bool)
    own[rows, blocks] = True
    jj, uu = np.nonzero(~own)
    v, t = parent[jj, uu], send_step[jj, uu]
    bad = (v < 0) | (v >= p) | (t < 0) | (t >= rounds)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PatternError(f"block {blocks[jj[i]]}: node {uu[i]} sends to {v[i]} at step {t[i]} "
                           f"(need a node and a step in 0..{rounds - 1})")
    inner = ~own[jj, v]
    late = inner & (send_step[jj, v] <= t)
    if late.any():
        i = int(np.flatnonzero(late)[0])
        raise PatternError(f"block {blocks[jj[i]]}: node {uu[i]} sends at step {t[i]} to node {v[i]}, which "
                           f"sends at step {send_step[jj[i], v[i]]} (must be later)")


def _check_equivariant(geom: TorusGeometry, peers: Sequence[np.ndarray], period: Sequence[int]) -> None:
    c = geom.coords()
    for k, t in enumerate(period):
        if t == geom.shape[k]:
            continue
        shift = np.zeros(geom.d, dtype=np.int64)
        shift[k] = t
        moved = geom.node(c + shift)
        for s, pe in enumerate(peers):
            pe = np.atleast_2d(pe)
            if not (pe[:, moved] == geom.node(geom.coords(pe) + shift)).all():
                raise PatternError(f"step {s}: the peers do not commute with the translation by {t} "
                                   f"in dimension {k}")


def _intree_instances(name: str, geom: TorusGeometry, period: tuple[int, ...],
                      instances: Sequence[tuple[np.ndarray, np.ndarray, int]], blocks: np.ndarray) -> CompactSchedule:
    """Transversal of independent reduce-scatter/allgather instances (one chunk per block)."""
    p, parts = geom.num_nodes, []
    C = len(instances) * p
    for parent, send, R in instances:
        check_intrees(parent, send, R, blocks)
        j, u = np.nonzero(parent >= 0)
        t, v = send[j, u], parent[j, u]
        ts, ss, ds = mirror_allgather(t, u, v, R)
        parts.append((np.concatenate([t, ts]), np.concatenate([u, ss]), np.concatenate([v, ds])))
    step, src, dst = (np.concatenate(a) for a in zip(*parts))
    return CompactSchedule(name, geom, period, step, src, dst, np.full(len(step), 1.0 / C), C)


def _label(name: str, geom: TorusGeometry) -> str:
    return f"{name} {'x'.join(map(str, geom.shape))}"


def _sp(geom: TorusGeometry) -> CompactSchedule:
    if len(set(geom.shape)) != 1:
        raise PatternError(f"compact sp-allreduce: equal sides only (got {geom.shape}); rectangular tori "
                           f"use the full generator")
    return _tree_family(_label("sp-allreduce", geom), geom, bfs_tree(geom), geom.diameter)


def _ksp(geom: TorusGeometry, k: int = 2) -> CompactSchedule:
    if len(set(geom.shape)) != 1:
        raise PatternError(f"k-sp-allreduce needs equal sides, got {geom.shape}")
    parent, _, _ = ksp_tree(geom, k)
    return _tree_family(f"k-sp-allreduce k={k} {'x'.join(map(str, geom.shape))}", geom, parent)


def _bucket(geom: TorusGeometry) -> CompactSchedule:
    blocks = np.array([0])
    inst = [bucket_trees(geom, i, sign, blocks) for i in range(geom.d) for sign in (1, -1)]
    return _intree_instances(_label("bucket", geom), geom, (1,) * geom.d, inst, blocks)


def _peer_family(name: str, geom: TorusGeometry, peer_sets: list, period: tuple[int, ...],
                 balanced: bool = False) -> CompactSchedule:
    blocks = _cell_nodes(geom, period)
    inst = []
    for peers in peer_sets:
        _check_equivariant(geom, peers, period)
        parent, send = balanced_intrees(geom, peers, blocks) if balanced else reach_intrees(peers, blocks)
        inst.append((parent, send, len(peers)))
    return _intree_instances(_label(name, geom), geom, period, inst, blocks)


def _swing_b(geom: TorusGeometry) -> CompactSchedule:
    period = tuple(2 if n % 2 == 0 else n for n in geom.shape)  # odd sides: no translation symmetry
    return _peer_family("swing-b", geom, [swing_peers(geom, k, odd=True) for k in range(2 * geom.d)], period)


def _trivance_b(geom: TorusGeometry) -> CompactSchedule:
    return _peer_family("trivance-b", geom, [trivance_peers(geom, i) for i in range(geom.d)], (1,) * geom.d,
                        balanced=True)


COMPACT_GENERATORS: dict[str, Callable[..., CompactSchedule]] = {
    "sp-allreduce": _sp, "k-sp-allreduce": _ksp, "bucket": _bucket, "swing-b": _swing_b, "trivance-b": _trivance_b}
"""Generators with a compact form: name -> ``f(geom, **options)``."""


def tree_route_links(geom: TorusGeometry, k: int | None = None) -> int:
    """Total hop count of the transversal routes of k-SP-allreduce (``k=None``: SP-allreduce,
    the BFS tree) on an equal-sided torus, from the distance profile alone (no tree built):
    ``2 phases x 2d point-group elements x W(T)``, W(T) the tree's summed edge lengths
    (``p - 1`` for the BFS tree, :func:`~reactccl.algorithms.kspt.layer_thresholds` for k).
    Lets callers refuse a sweep whose routes would not fit before any work."""
    p = geom.num_nodes
    if k is None or k >= geom.diameter:
        W = p - 1
    else:
        dist = np.abs(geom.offsets(np.zeros(p, dtype=np.int64), np.arange(p))).sum(axis=1)
        _, W = layer_thresholds(np.bincount(dist, minlength=geom.diameter + 1), k)
    return 4 * geom.d * int(W)


def compact_schedule(name: str, num_ranks: int, shape: Sequence[int] | None = None, dims: int = 2,
                     **options) -> CompactSchedule:
    """The checked compact form of generator ``name`` on the torus ``shape``.

    Args:
        name: one of :data:`COMPACT_GENERATORS`; options as for the full generator
            (``k`` for k-sp-allreduce), text converted as :func:`~.registry.generate` does.

    Raises:
        PatternError: no compact form for ``name``, no such torus, or a failed check.
    """
    if name not in COMPACT_GENERATORS:
        raise PatternError(f"no compact form for {name!r}; known: {', '.join(COMPACT_GENERATORS)}")
    opts = checked_options(name, {"shape": shape, "dims": dims, **options})  # typed like generate()
    try:
        geom = TorusGeometry(parse_shape(num_ranks, opts.pop("shape"), opts.pop("dims")))
    except ValueError as e:
        raise PatternError(f"{name} with {num_ranks} ranks: {e}") from e
    return COMPACT_GENERATORS[name](geom, **opts)


"""Structural checks of tree schedules, for sizes where the exact count check is too big.

* :func:`check_tree_family` — any AllReduce pattern whose chunks each follow a reduce
  in-tree then a copy broadcast (SP-allreduce, k-SP, Bucket, Swing-B, Trivance-B): per
  chunk, every rank but one root sends its partial exactly once, to a parent that sends
  strictly later (so the sends form an in-tree to the root and every contribution reaches
  it exactly once), and every non-root receives exactly one copy, after the chunk's last
  reduce, from the root or from a rank that received its copy earlier. These conditions
  imply what :func:`reactccl.pattern.verify` proves, at O(flows) cost.
* :func:`check_sp_symmetry` — SP-allreduce without materialising the pattern: the base
  tree is a BFS tree of depth H, the group elements are torus automorphisms, and Γ acts
  regularly on directed links, so every link carries (number of base-tree edges of that
  round) chunks in every round — Ω = 1 (the symmetrisation argument of §3) — and the
  round loads follow from the base tree alone.

Source: SP-allreduce §3 (symmetrisation), DESIGN.md (verification).
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ..topology.torus import TorusGeometry
from .torus_common import tree_depth

__all__ = ["check_tree_family", "check_sp_symmetry"]


def check_tree_family(pattern: CollectivePattern, geometry=None) -> dict:
    """Check the tree structure of every chunk (see the module docstring).

    Args:
        geometry: if given, also require every flow to join neighbours (one hop).

    Returns:
        ``{"chunks": C, "flows": F, "rounds": S}``.

    Raises:
        PatternError: naming the chunk and rank where the structure breaks.
    """
    p, C = pattern.num_ranks, pattern.num_chunks
    pf, ch = pattern.pair_flow, pattern.chunk_idx
    src, dst, step, op = pattern.src[pf], pattern.dst[pf], pattern.step[pf], pattern.op[pf]
    red, cp = op == 0, op == 1
    t_send = np.full(C * p, -1, dtype=np.int64)
    par = np.full(C * p, -1, dtype=np.int64)
    k = ch[red] * p + src[red]
    cnt = np.bincount(k, minlength=C * p)
    if (cnt > 1).any():
        bad = int(np.flatnonzero(cnt > 1)[0])
        raise PatternError(f"chunk {bad // p}: rank {bad % p} sends its partial {cnt[bad]} times")
    t_send[k], par[k] = step[red], dst[red]
    roots = (cnt.reshape(C, p) == 0)
    if not (roots.sum(axis=1) == 1).all():
        c = int(np.flatnonzero(roots.sum(axis=1) != 1)[0])
        raise PatternError(f"chunk {c}: {int(roots[c].sum())} ranks never send (expected exactly one root)")
    root = np.argmax(roots, axis=1)
    nr = np.flatnonzero(par >= 0)
    pk = (nr // p) * p + par[nr]
    late = (par[pk] >= 0) & (t_send[pk] <= t_send[nr])
    if late.any():
        i = int(nr[np.flatnonzero(late)[0]])
        raise PatternError(f"chunk {i // p}: rank {i % p} sends at step {t_send[i]} to rank {par[i]}, "
                           f"which sends at step {t_send[(i // p) * p + par[i]]} (must be later)")
    last_red = np.full(C, -1, dtype=np.int64)
    np.maximum.at(last_red, ch[red], step[red])
    t_recv = np.full(C * p, -1, dtype=np.int64)
    k2 = ch[cp] * p + dst[cp]
    cnt2 = np.bincount(k2, minlength=C * p)
    need = np.ones(C * p, dtype=np.int64)
    need[np.arange(C) * p + root] = 0
    if (cnt2 != need).any():
        bad = int(np.flatnonzero(cnt2 != need)[0])
        raise PatternError(f"chunk {bad // p}: rank {bad % p} receives {cnt2[bad]} copies (expected {need[bad]})")
    t_recv[k2] = step[cp]
    if (step[cp] <= last_red[ch[cp]]).any():
        i = int(np.flatnonzero(step[cp] <= last_red[ch[cp]])[0])
        raise PatternError(f"chunk {ch[cp][i]}: copy at step {step[cp][i]} before the last reduce")
    sk = ch[cp] * p + src[cp]
    from_root = src[cp] == root[ch[cp]]
    early = ~from_root & (t_recv[sk] >= step[cp])
    if early.any():
        i = int(np.flatnonzero(early)[0])
        raise PatternError(f"chunk {ch[cp][i]}: rank {src[cp][i]} forwards at step {step[cp][i]} a copy it "
                           f"has not received yet")
    if geometry is not None:
        far = geometry.distance(pattern.src, pattern.dst) != 1
        if far.any():
            i = int(np.flatnonzero(far)[0])
            raise PatternError(f"flow {i}: {pattern.src[i]} -> {pattern.dst[i]} is not one hop")
    return {"chunks": C, "flows": pattern.num_flows, "rounds": pattern.num_steps}


def check_sp_symmetry(geom: TorusGeometry, parent: np.ndarray, perms: np.ndarray) -> dict:
    """Prove SP-allreduce's properties from its base tree and group (no pattern needed).

    Args:
        parent: the base tree (root 0), shape ``(p,)``.
        perms: the group elements as node permutations, shape ``(G, p)`` (any int dtype).

    Returns:
        ``{"rounds", "chunks", "round_load"}`` where ``round_load[i]`` is the load of every
        directed link in reduce round i+1, in units of the message.

    Raises:
        PatternError: a tree edge that is not a link, a depth that is not the distance,
            a group element that is not an automorphism, or a non-regular action on links.
    """
    p, G = geom.num_nodes, perms.shape[0]
    depth = tree_depth(parent)
    nodes = np.arange(p)
    if not (depth == geom.distance(np.zeros(p, np.int64), nodes)).all():
        raise PatternError("base tree: some depth differs from the torus distance (not a BFS tree)")
    u = nodes[parent >= 0]
    if not (geom.distance(u, parent[u]) == 1).all():
        raise PatternError("base tree: an edge does not join neighbours")
    H = int(depth.max())
    # automorphisms: each element is a bijection mapping neighbourhoods onto neighbourhoods
    nb = geom.neighbours()
    nb_sorted = np.sort(nb, axis=1)
    for lo in range(0, G, 1024):
        blk = perms[lo:lo + 1024].astype(np.int64)
        if not (np.sort(blk, axis=1) == nodes).all():
            raise PatternError(f"group element in {lo}..{lo + len(blk) - 1} is not a permutation")
        img_nb = np.sort(blk[:, nb], axis=2)                 # g(N(u))
        nb_img = nb_sorted[blk]                              # N(g(u))
        if not (img_nb == nb_img).all():
            raise PatternError(f"group element in {lo}..{lo + len(blk) - 1} is not a torus automorphism")
    # regular action on directed links: images of one link hit every link once
    e1 = int(geom.neighbours([0])[0, 0])
    tail, head = perms[:, 0].astype(np.int64), perms[:, e1].astype(np.int64)
    off = geom.offsets(tail, head)
    dim = np.argmax(np.abs(off), axis=1)
    lid = geom.link(tail, dim, off[np.arange(G), dim])
    hits = np.bincount(lid, minlength=geom.num_links)
    if G != geom.num_links or not (hits == 1).all():
        raise PatternError(f"Γ ({G} elements) does not act regularly on the {geom.num_links} directed links")
    per_round = np.bincount(H - depth[u], minlength=H)  # base edges used in reduce round i+1
    return {"rounds": 2 * H, "chunks": G, "round_load": (per_round / G).tolist()}

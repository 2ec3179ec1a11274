"""Shared machinery of the tree-family schedules (SP-allreduce, k-SP, Bucket, Swing, Trivance).

Everything here works on flat flow arrays ``(chunk, step, src, dst, op)`` with one chunk
per flow (a chunk is its own chunk graph, so flows of different chunks on the same link
in the same round stay separate flows; the cost model adds them up per link and round).

* :func:`tree_schedule` — one rooted tree as an AllReduce for one chunk: nodes at depth
  ``h`` send to their parent in round ``h(T) - h + 1`` (reduce), then the root's result
  goes back down, depth ``h`` receiving in round ``h(T) + h`` (copy). SP-allreduce §3.1.
* :func:`symmetrize` — images of a one-chunk schedule under a group of node permutations,
  one chunk per group element (the tree-symmetrisation of SP-allreduce §3).
* :func:`intree_allreduce` — per-chunk reduce in-trees given as ``(parent, send_step)``
  tables, mirrored into the allgather (used by Bucket, Swing-B, Trivance-B).
* :func:`torus_group` — the subgroup Γ of torus automorphisms of §3.1 / §6.1.
* :func:`reach_intrees` — per-block reduce in-trees of a peer sequence (Swing-B, Trivance-B).
* :func:`dimension_walk` — the order in which a multi-dimensional collective visits dimensions.
* :func:`assemble` — flat arrays to a checked :class:`CollectivePattern`; :func:`combine`
  joins several patterns on disjoint parts of the message.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ..topology.torus import TorusGeometry

__all__ = ["FlowArrays", "tree_schedule", "symmetrize", "intree_allreduce", "mirror_allgather",
           "torus_group", "bfs_tree", "tree_depth", "assemble", "parse_shape", "reach_intrees",
           "balanced_intrees", "dimension_walk", "whole_vector_flows", "combine", "pack"]

FlowArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``(chunk, step, src, dst, op)``, each shape ``(F,)``; op 0 reduce, 1 copy."""


def parse_shape(num_ranks: int, shape: Sequence[int] | None, dims: int = 2) -> tuple[int, ...]:
    """The torus shape for ``num_ranks`` ranks: ``shape`` if given (its product must equal
    ``num_ranks``), else the equal-sided ``n^dims`` with ``n**dims == num_ranks``.

    Raises:
        PatternError: no such shape, or ``dims`` below 1 (named ``dims``).
    """
    if isinstance(dims, bool) or not isinstance(dims, (int, np.integer)) or dims < 1:
        raise PatternError(f"option dims: expected an integer >= 1 (torus dimensions), got {dims!r}")
    if shape is not None:
        shape = tuple(int(v) for v in shape)
        if int(np.prod(shape)) != num_ranks:
            raise PatternError(f"option shape {'x'.join(map(str, shape))}: {int(np.prod(shape))} nodes, not the "
                               f"{num_ranks} ranks (e.g. -O shape={'x'.join(map(str, squarest_shape(num_ranks, len(shape))))})")
        return shape
    n = int(round(num_ranks ** (1.0 / dims)))
    for cand in (n - 1, n, n + 1):
        # 2**dims > num_ranks: only side 1 can fit (and 2**dims would be a huge number)
        if cand >= 1 and (cand == 1 or dims < int(num_ranks).bit_length()) and cand ** dims == num_ranks:
            return (cand,) * dims
    near = squarest_shape(num_ranks, dims)
    text = "x".join(map(str, near))
    raise PatternError(f"{num_ranks} ranks are not an equal-sided {dims}-D torus: give its shape, e.g. -O shape={text} "
                       f"on the command line (shape={near} from Python)")


def squarest_shape(num_ranks: int, dims: int = 2) -> tuple[int, ...]:
    """The ``dims`` sides, largest first, whose product is ``num_ranks`` and whose longest side is
    shortest (ties: the shortest side longest): 12 -> ``(4, 3)``, 7 -> ``(7, 1)``; for hints."""
    def best(n: int, k: int) -> tuple[int, ...]:
        if k == 1:
            return (n,)
        found: tuple[int, ...] | None = None
        for a in range(1, int(round(n ** (1.0 / k))) + 2):
            if n % a == 0:
                cand = tuple(sorted((a, *best(n // a, k - 1)), reverse=True))
                if found is None or (cand[0], -cand[-1]) < (found[0], -found[-1]):
                    found = cand
        return found if found is not None else (n,) + (1,) * (k - 1)
    return best(int(num_ranks), int(dims))


def tree_depth(parent: np.ndarray) -> np.ndarray:
    """Depth of every node of a rooted tree given as a parent array (root: -1), shape ``(p,)``.

    Raises:
        PatternError: not exactly one root, or a cycle.
    """
    parent = np.asarray(parent, dtype=np.int64)
    p = len(parent)
    roots = np.flatnonzero(parent < 0)
    if len(roots) != 1:
        raise PatternError(f"tree: expected one root (parent -1), found {len(roots)}")
    depth = np.full(p, -1, dtype=np.int64)
    depth[roots[0]] = 0
    par = np.maximum(parent, 0)
    for _ in range(p):
        new = (depth < 0) & (depth[par] >= 0)
        if not new.any():
            break
        depth[new] = depth[par[new]] + 1
    if (depth >= 0).all():
        return depth
    raise PatternError("tree: the parent array has a cycle")


def tree_schedule(parent: np.ndarray, rounds: int | None = None) -> tuple[np.ndarray, ...]:
    """A one-chunk AllReduce along a rooted tree (reduce to the root, copy back down).

    Args:
        parent: parent of each node, root -1, shape ``(p,)``.
        rounds: reduce rounds (default the tree's depth h(T); a larger value delays
            nothing, it only shifts the broadcast).

    Returns:
        ``(step, src, dst, op)`` of the ``2(p-1)`` flows. Node at depth ``h`` sends up at
        step ``R - h`` and receives down at step ``R + h - 1`` (R = rounds).

    Example (path 2 - 1 - 0, root 0)::

        >>> tree_schedule(np.array([-1, 0, 1]))[:3]   # steps, srcs, dsts
        (array([0, 1, 2, 3]), array([2, 1, 0, 1]), array([1, 0, 1, 2]))
    """
    parent = np.asarray(parent, dtype=np.int64)
    depth = tree_depth(parent)
    R = int(depth.max()) if rounds is None else int(rounds)
    if R < depth.max():
        raise PatternError(f"tree_schedule: {R} rounds is less than the tree depth {depth.max()}")
    u = np.flatnonzero(parent >= 0)
    up = R - depth[u]
    down = R + depth[u] - 1
    step = np.concatenate([up, down])
    src = np.concatenate([u, parent[u]])
    dst = np.concatenate([parent[u], u])
    op = np.concatenate([np.zeros(len(u), np.int8), np.ones(len(u), np.int8)])
    order = np.argsort(step, kind="stable")
    return step[order], src[order], dst[order], op[order]


def symmetrize(base: tuple[np.ndarray, ...], perms: np.ndarray, chunk_offset: int = 0) -> FlowArrays:
    """Images of a one-chunk schedule under node permutations, one chunk per permutation.

    Args:
        base: ``(step, src, dst, op)`` of the schedule of one chunk, each shape ``(B,)``.
        perms: shape ``(G, p)``; ``perms[g, u]`` is the image of node u under element g.
        chunk_offset: id of the chunk of ``perms[0]``.

    Returns:
        Flow arrays with ``G * B`` flows; chunk ``chunk_offset + g`` follows ``g(base)``.
    """
    step, src, dst, op = (np.asarray(a) for a in base)
    G = perms.shape[0]
    chunk = np.repeat(np.arange(G, dtype=np.int64) + chunk_offset, len(step))
    return (chunk, np.tile(step, G), perms[:, src].reshape(-1), perms[:, dst].reshape(-1), np.tile(op, G))


def mirror_allgather(step: np.ndarray, src: np.ndarray, dst: np.ndarray, rs_rounds: int):
    """The allgather that undoes a reduce-scatter: each reduce flow ``(t, u -> v)`` becomes a
    copy ``(2R - 1 - t, v -> u)``. Returns ``(step, src, dst)``."""
    return 2 * rs_rounds - 1 - step, dst, src


def intree_allreduce(parent: np.ndarray, send_step: np.ndarray, rs_rounds: int,
                     chunk_ids: np.ndarray | None = None) -> FlowArrays:
    """AllReduce flows from per-chunk reduce in-trees, allgather mirrored.

    Args:
        parent: shape ``(C, p)``; ``parent[c, u]`` is where u sends its partial of chunk c
            (-1 at the chunk's root, which sends nothing).
        send_step: shape ``(C, p)``; the step of that send (ignored at the root).
        rs_rounds: R, the number of reduce-scatter steps; allgather steps are R..2R-1.
        chunk_ids: chunk id of each row (default 0..C-1).

    Returns:
        Flow arrays (reduce-scatter then allgather), ``2 * (number of sends)`` flows.
    """
    parent = np.asarray(parent, dtype=np.int64)
    C, p = parent.shape
    c, u = np.nonzero(parent >= 0)
    ids = np.arange(C) if chunk_ids is None else np.asarray(chunk_ids)
    t = np.asarray(send_step)[c, u]
    v = parent[c, u]
    if (t < 0).any() or (t >= rs_rounds).any():
        raise PatternError(f"intree_allreduce: send steps must lie in 0..{rs_rounds - 1}")
    ts, ss, ds = mirror_allgather(t, u, v, rs_rounds)
    n = len(t)
    return (np.concatenate([ids[c], ids[c]]), np.concatenate([t, ts]), np.concatenate([u, ss]),
            np.concatenate([v, ds]), np.concatenate([np.zeros(n, np.int8), np.ones(n, np.int8)]))


def torus_group(geom: TorusGeometry, reflect: bool = True, shifts: bool = True,
                translations: bool = True) -> np.ndarray:
    """Node permutations of the torus subgroup Γ = {u -> x + ε ρ^j(u)} (SP-allreduce §3.1).

    Args:
        geom: the torus; cyclic coordinate shifts ρ need equal sides.
        reflect: include ε = -1 (global reflection u -> -u).
        shifts: include the d cyclic shifts ρ^j (ρ(u_1..u_d) = (u_2..u_d, u_1)).
        translations: include every translation x (default); False keeps x = 0 only, the
            point group, one element per coset of the translations.

    Returns:
        ``perms``, shape ``(|Γ|, p)``, element index ``(e * J + j) * p + x`` where e indexes
        ε ∈ (+1, -1), j the shift and x the translation (node id). |Γ| = 2·d·n^d with both.

    Raises:
        PatternError: shifts on a torus with unequal sides.
    """
    d, p = geom.d, geom.num_nodes
    if shifts and d > 1 and len(set(geom.shape)) != 1:
        raise PatternError(f"torus_group: cyclic coordinate shifts need equal sides, got {geom.shape}")
    c = geom.coords()
    x = geom.coords() if translations else np.zeros((1, d), dtype=np.int64)
    out = []
    for eps in ((1, -1) if reflect else (1,)):
        for j in (range(d) if shifts else (0,)):
            img = eps * np.roll(c, -j, axis=1)  # ρ^j then ε
            out.append(geom.node(img[None, :, :] + x[:, None, :]))  # (x, u)
    return np.concatenate(out, axis=0).astype(np.int64)


def bfs_tree(geom: TorusGeometry, root: int = 0) -> np.ndarray:
    """A BFS (shortest-path) tree of the torus rooted at ``root``: each node's parent is the
    neighbour one step closer along the dimension with the largest remaining |offset|
    (lowest dimension on ties), so the tree fans out evenly (cf. SP-allreduce Fig. 1a).

    Returns:
        parent array, shape ``(p,)``, root -1; depth of node u = its distance to the root.
    """
    nodes = np.arange(geom.num_nodes)
    off = geom.offsets(np.full(len(nodes), root), nodes)  # root -> u
    k = np.argmax(np.abs(off), axis=1)
    c = geom.coords(nodes)
    c[nodes, k] -= np.sign(off[nodes, k])
    parent = geom.node(c)
    parent[root] = -1
    return parent


def assemble(num_ranks: int, flows: FlowArrays, chunk_size: np.ndarray | None = None,
             name: str = "", num_chunks: int | None = None) -> CollectivePattern:
    """An AllReduce pattern from flow arrays (one chunk per flow, chunk = its own graph),
    flows sorted by (step, chunk).

    Args:
        chunk_size: fraction of the message per chunk (default equal sizes).
        num_chunks: C (default 1 + the largest chunk id).
    """
    chunk, step, src, dst, op = flows
    C = int(chunk.max()) + 1 if num_chunks is None else int(num_chunks)
    size = np.full(C, 1.0 / C) if chunk_size is None else np.asarray(chunk_size, dtype=np.float64)
    order = np.lexsort((src, chunk, step))
    F = len(order)
    return CollectivePattern.from_arrays(
        "allreduce", num_ranks, size, np.arange(C), step[order], src[order], dst[order], op[order],
        np.arange(F + 1), chunk[order], name=name)


def dimension_walk(steps_per_dim: Sequence[int], start: int) -> list[tuple[int, int]]:
    """Global steps of a collective that starts on dimension ``start`` and moves to the next
    dimension every step, skipping dimensions whose steps are used up (Swing §5 on tori).

    Returns:
        ``[(dim, sigma), ...]``: the dimension of each global step and how many steps that
        dimension had before it. Example: ``dimension_walk([2, 1], 1) == [(1, 0), (0, 0), (0, 1)]``.
    """
    D = len(steps_per_dim)
    used = [0] * D
    out, k = [], start % D
    while sum(used) < sum(steps_per_dim):
        if used[k] < steps_per_dim[k]:
            out.append((k, used[k]))
            used[k] += 1
        k = (k + 1) % D
    return out


def _responsibility(peers: Sequence[np.ndarray], blocks: np.ndarray) -> list[np.ndarray]:
    """``M[t][q, j]``: block ``blocks[j]`` ∈ {q} ∪ reach(q, t+1), shape ``(p, B)`` per step
    (see :func:`reach_intrees`).

    Raises:
        PatternError: some node cannot reach some block.
    """
    S = len(peers)
    p = peers[0].shape[-1]
    nodes = np.arange(p)
    eye = nodes[:, None] == blocks[None, :]  # (node, block)
    M = [None] * S
    R = np.zeros((p, len(blocks)), dtype=bool)  # reach(x, t+1)
    for t in range(S - 1, -1, -1):
        M[t] = R | eye
        newR = R.copy()
        for q in np.atleast_2d(peers[t]):
            newR |= M[t][q] & (q != nodes)[:, None]  # a node that is its own peer idles
        R = newR
    if not (R | eye).all():
        r, j = np.argwhere(~(R | eye))[0]
        raise PatternError(f"peer sequence does not let node {r} reach block {blocks[j]}")
    return M


def reach_intrees(peers: Sequence[np.ndarray], blocks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Reduce-scatter in-trees of a peer sequence, one per block (block b ends at node b).

    At step t node x may send to any of its peers ``peers[t][:, x]``. ``M_t(q)`` = {q} ∪
    nodes reachable from q through steps > t is what q is responsible for after step t;
    node r sends its partial of block b once, at the latest step t where b ∈ M_t(q) for a
    peer q of r (the first such peer on ties) — the Swing rule "a block in several steps'
    send sets is sent only at the latest of them". Because b ∈ M_t(q) means q itself has a
    later candidate step, every parent sends after its children: the in-trees are exact for
    any peer sequence whose reach covers every node (so Ψ = 1). :func:`balanced_intrees`
    splits the ties between peers instead (Trivance's two ports).

    Args:
        peers: one array per step, shape ``(k_t, p)`` (k_t peers per node at step t; a
            node listed as its own peer idles in that step, a repeated peer is used once).
        blocks: compute the in-trees of these blocks only, shape ``(B,)`` (default all p);
            each block's tree depends on no other block, so a subset is exact.

    Returns:
        ``(parent, send_step)``, each shape ``(B blocks, p nodes)``; parent -1 at the owner.

    Raises:
        PatternError: some node cannot reach some block.

    Memory: ``(len(peers) + 2) * p * B`` bytes of booleans plus two int64 ``p x B`` tables.
    """
    S = len(peers)
    p = peers[0].shape[-1]
    nodes = np.arange(p)
    blocks = nodes if blocks is None else np.asarray(blocks, dtype=np.int64).reshape(-1)
    B = len(blocks)
    M = _responsibility(peers, blocks)
    parent = np.full((p, B), -1, dtype=np.int64)  # (node, block)
    step = np.full((p, B), -1, dtype=np.int64)
    for t in range(S):
        chosen = np.zeros((p, B), dtype=bool)
        for q in np.atleast_2d(peers[t]):
            hit = M[t][q] & ~chosen & (q != nodes)[:, None]  # (node r, block j)
            chosen |= hit
            rr, bb = np.nonzero(hit)
            parent[rr, bb] = q[rr]
            step[rr, bb] = t
    parent[blocks, np.arange(B)] = -1
    return parent.T.copy(), step.T.copy()


def _check_translation_invariant(geom: TorusGeometry, peers: Sequence[np.ndarray]) -> None:
    """Raise PatternError unless every step's peers commute with the unit translations."""
    c = geom.coords()
    for k in range(geom.d):
        e = np.zeros(geom.d, dtype=np.int64)
        e[k] = 1
        moved = geom.node(c + e)
        for s, pe in enumerate(peers):
            pe = np.atleast_2d(pe)
            if not (pe[:, moved] == geom.node(geom.coords(pe) + e)).all():
                raise PatternError(f"balanced in-trees: the peers of step {s} do not commute with the "
                                   f"unit translation in dimension {k}")


def balanced_intrees(geom: TorusGeometry, peers: Sequence[np.ndarray],
                     blocks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`reach_intrees` with ties between peers split by load (Trivance-B's two ports).

    Each block's partial still goes once, at the latest step t at which it belongs to a
    peer's share, so the in-trees stay exact; but where it belongs to the shares of several
    peers of that step (a tie), it goes to the peer that has been given the fewest blocks so
    far at that node and step (exclusive blocks counted first, ties then in block-offset
    order, the first peer on equal loads). Without this every tie lands on the "+" peer and
    the "−" port idles (on 6x6 node 0 would send 18 blocks to node 6 and none to node 30
    at step 0).

    The rule depends only on the offset ``b − r`` of block and node, so the peer sequence
    must commute with every translation of the torus; then one node's decisions for all
    offsets give every tree, and a subset of ``blocks`` costs ``O(S p)`` beyond the output.

    Args:
        geom: the torus.
        peers: one array per step, shape ``(k_t, p)`` as for :func:`reach_intrees`.
        blocks: block ids, shape ``(B,)`` (default all p).

    Returns:
        ``(parent, send_step)``, each shape ``(B, p)``; parent -1 at the owner.

    Raises:
        PatternError: peers that are not translation invariant, or a block some node cannot reach.
    """
    _check_translation_invariant(geom, peers)
    p, S = geom.num_nodes, len(peers)
    nodes = np.arange(p)
    blocks = nodes if blocks is None else np.asarray(blocks, dtype=np.int64).reshape(-1)
    M0 = _responsibility(peers, np.array([0]))  # M0[t][x, 0]: block 0 ∈ M_t(x)
    c = geom.coords()
    # node 0, block at offset o: peer q of node 0 is a candidate iff o ∈ M_t(q) iff 0 ∈ M_t(q - o)
    tstar = np.full(p, -1, dtype=np.int64)
    cands = []
    for t in range(S):
        qs = np.atleast_2d(peers[t])[:, 0]
        cand = np.zeros((len(qs), p), dtype=bool)
        for i, q in enumerate(qs):
            if q == 0 or q in qs[:i]:
                continue  # idle port, or a repeated peer
            cand[i] = M0[t][geom.node(geom.coords(q) - c), 0]
        cand[:, 0] = False  # node 0 keeps its own block
        cands.append(cand)
        tstar[cand.any(axis=0)] = t
    choice = np.zeros(p, dtype=np.int64)
    for t in range(S):
        cand = cands[t][:, tstar == t]
        offs = np.flatnonzero(tstar == t)
        k = cand.sum(axis=0)
        first = np.argmax(cand, axis=0)
        pick = first.copy()
        load = np.bincount(first[k == 1], minlength=cand.shape[0])
        for j in np.flatnonzero(k > 1):
            opts = np.flatnonzero(cand[:, j])
            pick[j] = opts[np.argmin(load[opts])]
            load[pick[j]] += 1
        choice[offs] = pick
    o = geom.node(geom.coords(blocks)[:, None, :] - c[None, :, :])  # (B, p) offsets b - r
    step = tstar[o]
    parent = np.full(o.shape, -1, dtype=np.int64)
    for t in range(S):
        pe = np.atleast_2d(peers[t])
        sel = step == t
        jj, rr = np.nonzero(sel)
        parent[jj, rr] = pe[choice[o[jj, rr]], rr]
    own = o == 0
    parent[own] = -1
    step[own] = -1
    return parent, step


def peer_instances_allreduce(num_ranks: int, geom: TorusGeometry, peer_sets: Sequence[Sequence[np.ndarray]],
                             name: str, balanced: bool = False) -> CollectivePattern:
    """AllReduce made of independent reduce-scatter/allgather instances, one per entry of
    ``peer_sets`` (each a list of per-step peer arrays, shape ``(k_t, p)``), instance ``k`` owning
    chunks ``k p .. (k+1) p - 1`` (Swing-B's 2d mirrored collectives, Trivance-B's d parts).
    ``balanced`` builds the in-trees with :func:`balanced_intrees` (ties split by load)
    instead of :func:`reach_intrees`."""
    p = geom.num_nodes
    parts = []
    for k, peers in enumerate(peer_sets):
        parent, step = balanced_intrees(geom, peers) if balanced else reach_intrees(peers)
        parts.append(intree_allreduce(parent, step, len(peers), chunk_ids=np.arange(p) + k * p))
    flows = tuple(np.concatenate(a) for a in zip(*parts))
    return assemble(num_ranks, flows, name=name)


def whole_vector_flows(peers_per_chunk: Sequence[Sequence[np.ndarray]]) -> FlowArrays:
    """Latency-optimal flows: at every step every node adds its whole chunk into each of its
    peers (Swing-L, Trivance-L). ``peers_per_chunk[c][t]`` has shape ``(k_t, p)``."""
    out = [[], [], [], [], []]
    for c, seq in enumerate(peers_per_chunk):
        for t, pe in enumerate(seq):
            pe = np.atleast_2d(pe)
            p = pe.shape[1]
            for q in pe:
                out[0].append(np.full(p, c))
                out[1].append(np.full(p, t))
                out[2].append(np.arange(p))
                out[3].append(q)
                out[4].append(np.zeros(p, np.int8))
    return tuple(np.concatenate(a) for a in out)


def combine(patterns: Sequence[CollectivePattern], name: str = "") -> CollectivePattern:
    """One AllReduce running ``patterns`` side by side on equal parts of the message: chunk
    sizes are divided by their number, chunk ids and chunk-graph ids are offset.

    Raises:
        PatternError: patterns with different collectives or rank counts.
    """
    first = patterns[0]
    if any(q.collective != first.collective or q.num_ranks != first.num_ranks for q in patterns):
        raise PatternError("combine: patterns must share collective and number of ranks")
    k = len(patterns)
    c_off = np.cumsum([0] + [q.num_chunks for q in patterns])
    g_off = np.cumsum([0] + [int(q.chunk_graph.max()) + 1 for q in patterns])
    p_off = np.cumsum([0] + [len(q.chunk_idx) for q in patterns])
    cat = lambda f: np.concatenate([f(i, q) for i, q in enumerate(patterns)])
    return CollectivePattern.from_arrays(
        first.collective, first.num_ranks, cat(lambda i, q: q.chunk_size / k),
        cat(lambda i, q: q.chunk_graph + g_off[i]), cat(lambda i, q: q.step), cat(lambda i, q: q.src),
        cat(lambda i, q: q.dst), cat(lambda i, q: q.op),
        np.concatenate([[0]] + [q.chunk_ptr[1:] + p_off[i] for i, q in enumerate(patterns)]),
        cat(lambda i, q: q.chunk_idx + c_off[i]), name=name)


def pack(pattern: CollectivePattern, group: np.ndarray | None = None) -> CollectivePattern:
    """The same schedule with the flows of one round on one (src, dst) pair packed into one
    message (SP-allreduce §3.1, §7.1 "Chunks"): all chunks join chunk graph 0 and flows with
    equal ``(step, src, dst, op)`` merge. Semantics are unchanged (``verify`` still holds);
    what is lost is the independence of the chunk graphs. Used to simulate and time
    schedules the way the paper runs them (one message per link and round).

    Args:
        group: optional group id per chunk, shape ``(C,)``; only flows whose chunks share a
            group merge (keeps independent instances of Bucket or Swing independent: packing
            them together would make one instance wait for the other).
    """
    key = ((pattern.step * pattern.num_ranks + pattern.src) * pattern.num_ranks + pattern.dst) * 2 + pattern.op
    if group is not None:
        g = np.asarray(group, dtype=np.int64)[pattern.chunk_idx[pattern.chunk_ptr[:-1]]]
        _, g = np.unique(g, return_inverse=True)
        key = key * (int(g.max()) + 1) + g
    order = np.argsort(key, kind="stable")
    ks = key[order]
    first = np.concatenate((np.ones(min(1, len(ks)), dtype=bool), ks[1:] != ks[:-1]))
    heads = order[first]
    counts = np.diff(pattern.chunk_ptr)[order]
    group = np.cumsum(first) - 1
    ptr = np.zeros(len(heads) + 1, dtype=np.int64)
    np.cumsum(np.bincount(group, weights=counts, minlength=len(heads)).astype(np.int64), out=ptr[1:])
    starts = pattern.chunk_ptr[order]
    # positions of each pair: start of its flow + offset within it
    offs = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    chunk_idx = pattern.chunk_idx[np.repeat(starts, counts) + offs]
    return CollectivePattern.from_arrays(
        pattern.collective, pattern.num_ranks, pattern.chunk_size, np.zeros(pattern.num_chunks, np.int64),
        pattern.step[heads], pattern.src[heads], pattern.dst[heads], pattern.op[heads], ptr, chunk_idx,
        root=pattern.root, name=(pattern.name + " packed").strip(), check=False)

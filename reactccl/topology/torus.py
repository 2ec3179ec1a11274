"""Direct-connect fabrics of the SP-allreduce paper: tori, HyperX and two-tier spine-leaf.

Each fabric is a small geometry object that numbers its compute nodes and its directed
links and routes node pairs on shortest paths, vectorised over many pairs:

* :class:`TorusGeometry` — the torus ``Z_{n_0} x ... x Z_{n_{d-1}}`` (equal-sided
  ``T_n^d`` or rectangular ``m x n``); dimension-order routes.
* :class:`HyperXGeometry` — HyperX ``n x n`` (the Cartesian product ``K_n □ K_n``);
  dimension-order routes of at most two hops.
* :class:`SpineLeafGeometry` — ``l`` leaves with ``q`` hosts each and ``q`` spines;
  a route between leaves goes through the spine whose index is the sender's host index.

Numbering. Node ``id = sum_k c_k * stride_k`` (row-major, coordinate 0 most significant).
Torus link ``id = 2*d*node + 2*k + (0 for +1, 1 for -1)`` (the link leaving ``node`` in
dimension ``k``). HyperX link ``id = 2*(n-1)*node + (n-1)*k + (delta - 1)``, where
``delta = (c'_k - c_k) mod n``.

Every geometry offers ``num_nodes``, ``num_links``, ``degree`` (links per compute node)
and ``route_pairs(src, dst) -> (pair_index, link)``: for each pair ``i`` the links of its
route, flattened (``pair_index[j]`` names the pair that uses ``link[j]``). The cost model
(:mod:`reactccl.cost.deficiency`) needs nothing else. :func:`fabric_topology` turns a
geometry into a :class:`reactccl.topology.Topology` with link rates and latencies
(defaults of SP-allreduce §7.1: 400 Gb/s links, 400 ns per hop).

Source: SP-allreduce (arXiv 2610.16387) §2.3, §6.2, §6.3, §7.1.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

from .graph import Topology, check_size

__all__ = ["TorusGeometry", "HyperXGeometry", "SpineLeafGeometry", "fabric_topology",
           "DEFAULT_LINK_RATE", "DEFAULT_HOP_LATENCY"]

DEFAULT_LINK_RATE = 400e9      # bit/s, SP-allreduce §7.1
DEFAULT_HOP_LATENCY = 400e-9   # s per hop: 100 ns link + 300 ns router, §7.1


def _as_pairs(src, dst) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(src, dtype=np.int64).reshape(-1)
    t = np.asarray(dst, dtype=np.int64).reshape(-1)
    if s.shape != t.shape:
        raise ValueError(f"route_pairs: src has {s.size} entries but dst has {t.size}")
    return s, t


class _Grid:
    """Shared coordinate arithmetic of tori and HyperX (row-major node numbering)."""

    def __init__(self, shape: Sequence[int], min_side: int, what: str) -> None:
        shape = tuple(int(v) for v in shape)
        if not shape or any(v < min_side for v in shape):
            why = " (two distinct neighbours per dimension)" if what == "torus" and min_side == 3 else ""
            raise ValueError(f"{what}: every side must be >= {min_side}{why}, got {'x'.join(map(str, shape)) or '()'}")
        self.shape = shape
        self.d = len(shape)
        self.sides = np.asarray(shape, dtype=np.int64)
        self.strides = np.ones(self.d, dtype=np.int64)
        for k in range(self.d - 2, -1, -1):
            self.strides[k] = self.strides[k + 1] * shape[k + 1]
        self.num_nodes = int(np.prod(self.sides))

    def coords(self, nodes=None) -> np.ndarray:
        """Coordinates of ``nodes`` (all nodes if None), shape ``(len, d)``."""
        nodes = np.arange(self.num_nodes) if nodes is None else np.asarray(nodes, dtype=np.int64)
        return (nodes[..., None] // self.strides) % self.sides

    def node(self, coords) -> np.ndarray:
        """Node ids of coordinates (taken modulo the sides), shape ``coords.shape[:-1]``."""
        c = np.asarray(coords, dtype=np.int64)
        return ((c % self.sides) * self.strides).sum(axis=-1)

    def offsets(self, src, dst) -> np.ndarray:
        """Signed shortest offsets ``dst - src`` per dimension, each in ``(-n_k/2, n_k/2]``,
        shape ``(len, d)``."""
        delta = (self.coords(dst) - self.coords(src)) % self.sides
        return np.where(delta > self.sides // 2, delta - self.sides, delta)


class TorusGeometry(_Grid):
    """The torus ``Z_{n_0} x ... x Z_{n_{d-1}}`` with links both ways in every dimension.

    Args:
        shape: side lengths, each >= 3 (so the two neighbours in a dimension differ).

    Attributes: ``num_nodes`` = prod(shape), ``degree`` = 2d, ``num_links`` = 2d * num_nodes,
    ``diameter`` = sum floor(n_k/2) (H of §2.3).

    Raises:
        ValueError: a side below 3.
    """

    def __init__(self, shape: Sequence[int]) -> None:
        super().__init__(shape, 3, "torus")
        self.degree = 2 * self.d
        self.num_links = self.degree * self.num_nodes
        self.diameter = int((self.sides // 2).sum())
        self.name = "torus " + "x".join(map(str, self.shape))

    def link(self, nodes, dim, sign) -> np.ndarray:
        """Link id leaving ``nodes`` in dimension ``dim`` towards ``sign`` (+1 or -1)."""
        return (np.asarray(nodes, dtype=np.int64) * self.degree + 2 * np.asarray(dim)
                + (np.asarray(sign) < 0))

    def link_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """``(tail, head)`` node of every link, each shape ``(num_links,)``."""
        lid = np.arange(self.num_links)
        tail, rest = lid // self.degree, lid % self.degree
        dim, neg = rest // 2, rest % 2
        c = self.coords(tail)
        c[np.arange(len(lid)), dim] += np.where(neg == 1, -1, 1)
        return tail, self.node(c)

    def neighbours(self, nodes=None) -> np.ndarray:
        """Neighbours of each node in link order, shape ``(len, 2d)``."""
        c = self.coords(nodes)
        out = []
        for k in range(self.d):
            for s in (1, -1):
                cc = c.copy()
                cc[..., k] += s
                out.append(self.node(cc))
        return np.stack(out, axis=-1)

    def distance(self, src, dst) -> np.ndarray:
        """Hop distance (sum of per-dimension ring distances)."""
        return np.abs(self.offsets(src, dst)).sum(axis=-1)

    def route_pairs(self, src, dst, order: Sequence[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Dimension-order shortest routes (ties at n/2 go the + way).

        Args:
            src, dst: node ids, shape ``(P,)``.
            order: the order in which dimensions are corrected (default 0, 1, ..., d-1).

        Returns:
            ``(pair_index, link)``, each shape ``(sum of hop counts,)``.
        """
        s, t = _as_pairs(src, dst)
        off = self.offsets(s, t)
        cur = self.coords(s)
        pidx, links = [], []
        for k in (range(self.d) if order is None else order):
            hops = np.abs(off[:, k])
            sign = np.sign(off[:, k])
            rep = np.repeat(np.arange(len(s)), hops)
            j = np.arange(len(rep)) - np.repeat(np.cumsum(hops) - hops, hops)
            c = cur[rep].copy()
            c[:, k] += sign[rep] * j
            links.append(self.link(self.node(c), k, sign[rep]))
            pidx.append(rep)
            cur[:, k] += off[:, k]
        if not links:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(pidx), np.concatenate(links)


class HyperXGeometry(_Grid):
    """HyperX ``n x n`` (or any ``n_0 x ... x n_{d-1}``): a node links to every node that
    differs from it in exactly one coordinate (``K_n □ K_n``), §6.2.

    Attributes: ``degree`` = sum(n_k - 1) (62 for 32 x 32), ``num_links`` = degree * num_nodes.

    Raises:
        ValueError: a side below 2, or unequal sides (link numbering assumes equal sides).
    """

    def __init__(self, shape: Sequence[int]) -> None:
        super().__init__(shape, 2, "HyperX")
        if len(set(self.shape)) != 1:
            raise ValueError(f"HyperX: sides must be equal, got {self.shape}")
        self.n = self.shape[0]
        self.degree = self.d * (self.n - 1)
        self.num_links = self.degree * self.num_nodes
        self.diameter = self.d
        self.name = "HyperX " + "x".join(map(str, self.shape))

    def link(self, nodes, dim, delta) -> np.ndarray:
        """Link from ``nodes`` to the node ``delta`` (1..n-1, mod n) further in ``dim``."""
        return (np.asarray(nodes, dtype=np.int64) * self.degree + (self.n - 1) * np.asarray(dim)
                + np.asarray(delta) - 1)

    def link_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """``(tail, head)`` node of every link, each shape ``(num_links,)``."""
        lid = np.arange(self.num_links)
        tail, rest = lid // self.degree, lid % self.degree
        dim, delta = rest // (self.n - 1), rest % (self.n - 1) + 1
        c = self.coords(tail)
        c[np.arange(len(lid)), dim] += delta
        return tail, self.node(c)

    def distance(self, src, dst) -> np.ndarray:
        """Hop distance: the number of coordinates that differ."""
        return (self.coords(src) != self.coords(dst)).sum(axis=-1)

    def route_pairs(self, src, dst) -> tuple[np.ndarray, np.ndarray]:
        """Dimension-order routes (one hop per differing coordinate); see :class:`TorusGeometry`."""
        s, t = _as_pairs(src, dst)
        cur, goal = self.coords(s), self.coords(t)
        pidx, links = [], []
        for k in range(self.d):
            sel = np.flatnonzero(cur[:, k] != goal[:, k])
            delta = (goal[sel, k] - cur[sel, k]) % self.n
            links.append(self.link(self.node(cur[sel]), k, delta))
            pidx.append(sel)
            cur[sel, k] = goal[sel, k]
        return np.concatenate(pidx), np.concatenate(links)


class SpineLeafGeometry:
    """Two-tier spine-leaf (Clos) fabric: ``leaves`` leaves with ``q`` hosts each, ``q``
    spines, every leaf linked to every spine (§6.3). Host ``h_{i,j}`` (host i on leaf j)
    has node id ``j*q + i``.

    Links (ids): host up ``node`` (0..p-1), host down ``p + node``, leaf j -> spine s
    ``2p + j*q + s``, spine s -> leaf j ``2p + l*q + j*q + s``. A route on one leaf is
    up, down (2 hops); across leaves it is up, leaf -> spine ``i``, spine -> leaf, down
    (4 hops), with ``i`` the sender's host index — equivariant under the group
    ``h_{i,j} -> h_{i+a, j+b}`` of §6.3. Switches are numbered after the hosts: leaf j
    is switch node ``p + j``, spine s is ``p + l + s`` (see :meth:`link_ends`).

    Raises:
        ValueError: ``q`` or ``leaves`` below 1.
    """

    def __init__(self, q: int, leaves: int) -> None:
        if q < 1 or leaves < 1:
            raise ValueError(f"spine-leaf: need q >= 1 hosts per leaf and >= 1 leaves, got q={q}, leaves={leaves}")
        self.q, self.leaves = int(q), int(leaves)
        self.num_nodes = self.q * self.leaves
        self.num_links = 2 * self.num_nodes + 2 * self.leaves * self.q
        self.degree = 1
        self.diameter = 4 if self.leaves > 1 else 2
        self.name = f"spine-leaf {self.q}x{self.leaves}x{self.q}"

    def distance(self, src, dst) -> np.ndarray:
        """Hop count of the route (0, 2 or 4)."""
        s, t = _as_pairs(src, dst)
        return np.where(s == t, 0, np.where(s // self.q == t // self.q, 2, 4))

    def link_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """``(tail, head)`` node of every link, each shape ``(num_links,)``; hosts are nodes
        ``0..p-1``, leaf j is ``p + j``, spine s is ``p + leaves + s``."""
        p, q, l = self.num_nodes, self.q, self.leaves
        host = np.arange(p)
        leaf_of = p + host // q
        j, sp = np.divmod(np.arange(l * q), q)  # (leaf, spine) of each leaf-spine cable
        tail = np.concatenate([host, leaf_of, p + j, p + l + sp])
        head = np.concatenate([leaf_of, host, p + l + sp, p + j])
        return tail, head

    def route_pairs(self, src, dst) -> tuple[np.ndarray, np.ndarray]:
        """Routes as ``(pair_index, link)``, each pair's links in route order (up,
        leaf -> spine, spine -> leaf, down) once grouped stably by pair; see the class docstring."""
        s, t = _as_pairs(src, dst)
        p, q, l = self.num_nodes, self.q, self.leaves
        idx = np.flatnonzero(s != t)
        far = idx[s[idx] // q != t[idx] // q]
        spine = s[far] % q
        pidx = np.concatenate([idx, far, far, idx])
        links = np.concatenate([s[idx], 2 * p + (s[far] // q) * q + spine,
                                2 * p + l * q + (t[far] // q) * q + spine, p + t[idx]])
        return pidx, links


def fabric_topology(geometry, link_rate: float = DEFAULT_LINK_RATE,
                    hop_latency: float = DEFAULT_HOP_LATENCY):
    """A :class:`reactccl.topology.Topology` for a torus, HyperX or spine-leaf geometry that
    routes every flow on the geometry's own route (its ``route_pairs`` as the topology's
    fixed router: dimension-order on tori and HyperX, the sender's spine on spine-leaf),
    so the simulator and the cost model load the same links.

    Compute node ``i`` is host ``i`` (named ``n{i}``); spine-leaf adds switches ``leaf{j}``
    and ``spine{s}``. Link ``k`` of the geometry is link ``k`` of the topology, each with
    ``capacity`` = ``link_rate`` (bit/s) and ``latency`` = ``hop_latency`` (s; §7.1 counts
    100 ns link + 300 ns router per hop, charged here per link, so a spine-leaf route of 4
    links costs 4 hop latencies).

    Raises:
        ValueError: a non-positive rate, a negative latency, or another kind of geometry.
    """
    if not link_rate > 0 or not hop_latency >= 0:
        raise ValueError(f"link_rate must be > 0 and hop_latency >= 0, got {link_rate}, {hop_latency}")
    if not isinstance(geometry, (TorusGeometry, HyperXGeometry, SpineLeafGeometry)):
        raise ValueError(f"fabric_topology: expected a torus, HyperX or spine-leaf geometry, "
                         f"got {type(geometry).__name__}")
    check_size(geometry.name, geometry.num_nodes, geometry.num_links)
    tail, head = geometry.link_ends()
    names = [f"n{i}" for i in range(geometry.num_nodes)]
    g = nx.DiGraph()
    g.add_nodes_from((n, {"kind": "host"}) for n in names)
    if isinstance(geometry, SpineLeafGeometry):
        switches = [f"leaf{j}" for j in range(geometry.leaves)] + [f"spine{s}" for s in range(geometry.q)]
        g.add_nodes_from((n, {"kind": "switch"}) for n in switches)
        names += switches
    edges = [(names[u], names[v]) for u, v in zip(tail.tolist(), head.tolist())]
    g.add_edges_from(edges, capacity=float(link_rate), latency=float(hop_latency))
    name = geometry.name.replace(" ", ":")
    return Topology(g, name=name, link_order=edges, router=geometry.route_pairs)

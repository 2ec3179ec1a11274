"""The network graph: hosts, switches and directed links, with shortest-path and ECMP routing.

A :class:`Topology` wraps a ``networkx.DiGraph`` whose nodes carry ``kind``
("host" or "switch") and whose edges carry ``link`` (an int id 0..L-1),
``capacity`` (bit/s) and ``latency`` (s). The two directions of a cable are two
links. Hosts are numbered 0..H-1 in the order they were added to the graph.

Routing follows REACT §7.3: flows take shortest paths (fewest hops) and ECMP
picks one of them by hashing (src, dst, flow, port) with a stable hash
(splitmix64, not Python's salted ``hash``), so a run is reproducible. The paths are
enumerated from compiled BFS distances (:mod:`.paths`). A topology of multi-GPU servers
carries a :class:`~.servers.ServerLayout` (``servers``) whose routing (NVLink inside a server,
NICs and PXN between servers, ECMP over the fabric only) gives the paths instead.

A topology may instead carry a fixed *router* (``router=``): a vectorised
``route(src_hosts, dst_hosts) -> (pair_index, link)`` that gives every (src, dst)
one route, as the direct-connect fabrics of :mod:`.torus` do (dimension-order
routes on tori and HyperX, the sender's spine on spine-leaf, SP-allreduce §2.3,
§6.3). Then :meth:`Topology.ecmp_paths` returns those routes whatever the key and
never enumerates paths with networkx.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from ..errors import ReactcclError
from .paths import FewestHops, nx_fewest_hop_paths

if TYPE_CHECKING:
    from .servers import ServerLayout

__all__ = ["Router", "Topology", "TopologyError", "add_cable", "stable_hash", "check_size", "MAX_LINKS"]

MAX_LINKS = 2_000_000
"""Most directed links a topology may have: a networkx graph holds about 1 KB per link with
its attributes, so this is about 2 GB (fat-tree k=48 has 165,888 links, a 64x64 torus 16,384)."""
_BYTES_PER_LINK = 1000

#: A fixed router: ``route(src_hosts, dst_hosts) -> (pair_index, link)`` for host-id arrays of
#: shape ``(P,)``; ``link[j]`` is a link of pair ``pair_index[j]``, and each pair's links appear
#: in route order (first hop first) once grouped stably by pair index.
Router = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def check_size(name: str, hosts: int, links: int) -> None:
    """Refuse, before anything is built, a topology of more than :data:`MAX_LINKS` directed links,
    naming its host and link counts and the memory it would take.

    Raises:
        TopologyError: ``links`` > :data:`MAX_LINKS`.
    """
    hosts, links = int(hosts), int(links)
    if links > MAX_LINKS:
        raise TopologyError(
            f"{name}: {hosts:,} hosts and {links:,} directed links would take about "
            f"{links * _BYTES_PER_LINK / 1e9:,.0f} GB as a graph (~1 KB per link); "
            f"the limit is {MAX_LINKS:,} links")


class TopologyError(ReactcclError, ValueError):
    """A topology, a host or a link was given wrongly; the message names it."""


def add_cable(graph: nx.DiGraph, u, v, capacity: float, latency: float) -> None:
    """Add the two directed links ``u->v`` and ``v->u`` of one cable to ``graph``.

    Link ids are assigned later by :class:`Topology` in edge-insertion order.
    """
    graph.add_edge(u, v, capacity=float(capacity), latency=float(latency))
    graph.add_edge(v, u, capacity=float(capacity), latency=float(latency))


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def stable_hash(*columns: np.ndarray | int) -> np.ndarray:
    """A reproducible 64-bit hash of integer columns (splitmix64 chained), shape broadcast of the inputs.

    Used for ECMP so that the same (src, dst, job, flow, port) always picks the
    same path, across processes and Python versions.
    """
    cols = [np.asarray(c).astype(np.uint64) for c in columns]
    shape = np.broadcast_shapes(*(c.shape for c in cols)) if cols else ()
    h = np.full(shape, 0x243F6A8885A308D3, dtype=np.uint64)
    with np.errstate(over="ignore"):  # arithmetic is mod 2^64 on purpose
        for c in cols:
            z = h + _GOLDEN + c
            z = (z ^ (z >> np.uint64(30))) * _M1
            z = (z ^ (z >> np.uint64(27))) * _M2
            h = z ^ (z >> np.uint64(31))
    return h


class Topology:
    """A network of hosts and switches joined by directed links.

    Attributes:
        name: a spec-like name, e.g. ``"fat-tree:k=4"``.
        graph: the ``networkx.DiGraph`` (node attr ``kind``; edge attrs ``link``,
            ``capacity`` in bit/s, ``latency`` in s).
        nodes: node names; ``link_src``/``link_dst`` index into it.
        hosts: host node names; host id = index in this list.
        capacity, latency: per-link arrays, shape ``(L,)`` (bit/s, s).
        link_src, link_dst: per-link node indices, shape ``(L,)``.
        router: the fixed :data:`Router`, or None for ECMP over all shortest paths.
        servers: the :class:`~.servers.ServerLayout` of a topology of multi-GPU servers (set by
            its builder), or None (one rank per host).

    Args:
        graph, name: as the attributes.
        link_order: the graph's edges ``(u, v)`` in link-id order (default: networkx's
            edge order, i.e. by source node, then insertion); lets a builder keep an
            outside numbering such as a geometry's link ids.
        router: a fixed router (see the module docstring); routes are checked to be
            link chains from the source host to the destination host when used.

    Raises:
        TopologyError: a node without a valid ``kind``, an edge without a
            positive ``capacity`` or a non-negative ``latency``, no hosts, or a
            ``link_order`` that is not every edge of the graph exactly once.
    """

    def __init__(self, graph: nx.DiGraph, name: str = "topology", *,
                 link_order: Iterable[tuple] | None = None, router: Router | None = None) -> None:
        self.name = str(name)
        self.graph = graph
        self.nodes = list(graph.nodes)
        index = {n: i for i, n in enumerate(self.nodes)}
        for n, kind in graph.nodes(data="kind"):
            if kind not in ("host", "switch"):
                raise TopologyError(f"node {n!r}: kind must be 'host' or 'switch', got {kind!r}")
        self.hosts = [n for n, k in graph.nodes(data="kind") if k == "host"]
        if not self.hosts:
            raise TopologyError(f"{self.name}: a topology needs at least one host")
        self.host_index = {h: i for i, h in enumerate(self.hosts)}
        edges = list(graph.edges(data=True)) if link_order is None else self._ordered_edges(graph, link_order)
        L = len(edges)
        self.capacity = np.empty(L)
        self.latency = np.empty(L)
        self.link_src = np.empty(L, dtype=np.int64)
        self.link_dst = np.empty(L, dtype=np.int64)
        self._link_of: dict[tuple, int] = {}
        for i, (u, v, d) in enumerate(edges):
            cap, lat = d.get("capacity"), d.get("latency", 0.0)
            if cap is None or not float(cap) > 0:
                raise TopologyError(f"link {u!r}->{v!r}: capacity must be > 0 bit/s, got {cap!r}")
            if not float(lat) >= 0:
                raise TopologyError(f"link {u!r}->{v!r}: latency must be >= 0 s, got {lat!r}")
            d["link"] = i
            self.capacity[i], self.latency[i] = float(cap), float(lat)
            self.link_src[i], self.link_dst[i] = index[u], index[v]
            self._link_of[(u, v)] = i
        for arr in (self.capacity, self.latency, self.link_src, self.link_dst):
            arr.flags.writeable = False
        self._routing: dict[str, FewestHops] = {}  # path finders (shared by degraded copies)
        self._paths: dict[tuple[int, int], np.ndarray] = {}  # (src host, dst host) -> paths (shared too)
        self.servers: ServerLayout | None = None
        self.router = router
        host_node = np.array([index[h] for h in self.hosts], dtype=np.int64)
        host_node.flags.writeable = False
        self._host_node = host_node

    def _ordered_edges(self, graph: nx.DiGraph, link_order: Iterable[tuple]) -> list[tuple]:
        order = [tuple(e) for e in link_order]
        if len(order) != graph.number_of_edges() or len(set(order)) != len(order):
            raise TopologyError(f"{self.name}: link_order must list each of the {graph.number_of_edges()} "
                                f"edges once, got {len(order)} entries ({len(set(order))} distinct)")
        out = []
        for u, v in order:
            if not graph.has_edge(u, v):
                raise TopologyError(f"{self.name}: link_order names {u!r}->{v!r}, which is not an edge")
            out.append((u, v, graph.edges[u, v]))
        return out

    # ------------------------------------------------------------ basic facts
    @property
    def num_links(self) -> int:
        """Number of directed links L."""
        return len(self.capacity)

    @property
    def num_hosts(self) -> int:
        """Number of hosts H."""
        return len(self.hosts)

    @property
    def switches(self) -> list:
        """Switch node names."""
        return [n for n, k in self.graph.nodes(data="kind") if k == "switch"]

    def __repr__(self) -> str:
        routed = ", fixed routes" if self.router is not None else ""
        if self.servers is not None:
            routed += f", servers={self.servers.S}x{self.servers.G} GPUs, {self.servers.K} NICs each"
        return (f"Topology({self.name!r}, hosts={self.num_hosts}, switches={len(self.nodes) - self.num_hosts}, "
                f"links={self.num_links}{routed})")

    def host_id(self, host) -> int:
        """The host id of ``host`` (an int id or a host node name such as ``"h3"``).

        Raises:
            TopologyError: unknown host.
        """
        if isinstance(host, (int, np.integer)) and not isinstance(host, bool):
            if not 0 <= int(host) < self.num_hosts:
                raise TopologyError(f"host {host}: out of range 0..{self.num_hosts - 1} in {self.name}")
            return int(host)
        if host in self.host_index:
            return self.host_index[host]
        raise TopologyError(f"host {host!r}: no such host in {self.name} (hosts are "
                            f"{self.hosts[0]!r}..{self.hosts[-1]!r})")

    def link_id(self, u, v) -> int:
        """The id of the directed link from node ``u`` to node ``v``.

        Raises:
            TopologyError: no such link.
        """
        try:
            return self._link_of[(u, v)]
        except KeyError:
            raise TopologyError(f"no link {u!r}->{v!r} in {self.name}") from None

    def host_links(self, host) -> tuple[int, int]:
        """``(uplink, downlink)`` link ids of a single-homed host.

        Raises:
            TopologyError: unknown host, or a host with more than one neighbour.
        """
        h = self.hosts[self.host_id(host)]
        nbrs = list(self.graph.successors(h))
        if len(nbrs) != 1:
            raise TopologyError(f"host {h!r} has {len(nbrs)} neighbours; host_links needs exactly one")
        return self.link_id(h, nbrs[0]), self.link_id(nbrs[0], h)

    def cables(self) -> np.ndarray:
        """Pairs of link ids ``(u->v, v->u)`` with ``u->v`` the lower id, shape ``(P, 2)``;
        a link without a reverse appears as ``(id, -1)``."""
        out, seen = [], set()
        for (u, v), i in self._link_of.items():
            if i in seen:
                continue
            j = self._link_of.get((v, u), -1)
            seen.update((i, j))
            out.append((min(i, j) if j >= 0 else i, max(i, j) if j >= 0 else -1))
        return np.array(sorted(out), dtype=np.int64).reshape(-1, 2)

    # ---------------------------------------------------------------- routing
    def shortest_paths(self, src_host, dst_host) -> list[np.ndarray]:
        """All fewest-hop paths from ``src_host`` to ``dst_host`` as link-id arrays (on a servers
        topology: the paths its routing allows, :mod:`.servers`), the choices ECMP hashes among.

        Order is deterministic (lexicographic in link ids); the result is cached.
        All paths have the same length (0 links when src == dst).

        Raises:
            TopologyError: unknown host or no path.
        """
        return list(self._path_array(self.host_id(src_host), self.host_id(dst_host)))

    def _path_array(self, s: int, d: int) -> np.ndarray:
        """All routable paths from host ``s`` to host ``d``, shape ``(m, hops)``."""
        return self._path_tables(np.array([s]), np.array([d]))[0]

    def _path_tables(self, src: np.ndarray, dst: np.ndarray) -> list[np.ndarray]:
        """Path tables of host pairs ``(src[i], dst[i])`` (cached per pair): every fewest-hop path
        (:class:`~.paths.FewestHops`), or on a servers topology the paths its routing allows
        (:meth:`~.servers.ServerLayout.path_tables`).

        Raises:
            TopologyError: a pair with no path.
        """
        out = [self._paths.get((int(s), int(d))) for s, d in zip(src.tolist(), dst.tolist(), strict=True)]
        todo = [i for i, t in enumerate(out) if t is None]
        if todo:
            s_todo, d_todo = src[todo], dst[todo]
            if self.servers is not None:
                got = self.servers.path_tables(self, s_todo, d_todo)
            else:
                got = self.fewest_hops().tables(self._host_node[s_todo], self._host_node[d_todo])
            for i, s, d, table in zip(todo, s_todo.tolist(), d_todo.tolist(), got, strict=True):
                if table is None:
                    raise TopologyError(f"no path from host {self.hosts[s]!r} to host {self.hosts[d]!r} "
                                        f"in {self.name}")
                self._paths[(s, d)] = out[i] = table
        return out  # type: ignore[return-value]

    def fewest_hops(self) -> FewestHops:
        """The fewest-hop path finder over all links (built once, shared by degraded copies)."""
        hops = self._routing.get("all")
        if hops is None:
            hops = self._routing["all"] = FewestHops(len(self.nodes), self.link_src, self.link_dst)
        return hops

    def reference_paths(self, src_host, dst_host) -> np.ndarray:
        """The paths of :meth:`shortest_paths` found the slow, plain way (networkx BFS predecessor
        lists, :func:`~.paths.nx_fewest_hop_paths`), shape ``(m, hops)``: the reference the fast
        path is tested and benchmarked against.

        Raises:
            TopologyError: unknown host or no path.
        """
        s, d = self.host_id(src_host), self.host_id(dst_host)
        if self.servers is not None:
            table = self.servers.path_tables(self, np.array([s]), np.array([d]), reference=True)[0]
        else:
            table = nx_fewest_hop_paths(self.graph, self._link_of, self.hosts[s], self.hosts[d])
        if table is None:
            raise TopologyError(f"no path from host {self.hosts[s]!r} to host {self.hosts[d]!r} in {self.name}")
        return table

    def ecmp_path(self, src_host, dst_host, key: Sequence[int]) -> np.ndarray:
        """The shortest path ECMP picks for one flow: index ``stable_hash(src, dst, *key) mod m``
        among :meth:`shortest_paths`. ``key`` is e.g. ``(job, flow, port)``. With a
        :attr:`router`, the router's route whatever the key."""
        s, d = self.host_id(src_host), self.host_id(dst_host)
        ptr, links = self.ecmp_paths(np.array([s]), np.array([d]), np.asarray([list(key)], dtype=np.int64))
        return links[ptr[0]:ptr[1]]

    def ecmp_paths(self, src_hosts: np.ndarray, dst_hosts: np.ndarray,
                   keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """ECMP paths of many flows at once (the vectorised :meth:`ecmp_path`).

        Args:
            src_hosts, dst_hosts: host ids, shape ``(F,)``.
            keys: extra hash inputs per flow, shape ``(F, k)`` (e.g. job, flow, port).

        Returns:
            CSR ``(ptr, links)``: flow ``f`` uses links ``links[ptr[f]:ptr[f+1]]`` in order.
            With a :attr:`router` the keys are ignored (one route per pair).

        Raises:
            TopologyError: a host id out of range, no path, or a router route that is not
                a chain of links from the source host to the destination host.
        """
        src = np.asarray(src_hosts, dtype=np.int64).reshape(-1)
        dst = np.asarray(dst_hosts, dtype=np.int64).reshape(-1)
        F, H = len(src), self.num_hosts
        if F == 0:
            return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
        keys = np.asarray(keys, dtype=np.int64).reshape(F, -1)
        for name, arr in (("src_hosts", src), ("dst_hosts", dst)):
            bad = np.flatnonzero((arr < 0) | (arr >= H))
            if bad.size:
                raise TopologyError(f"{name}[{bad[0]}]: host {arr[bad[0]]} out of range 0..{H - 1}")
        if self.router is not None:
            return self._routed_paths(src, dst)
        h = stable_hash(src, dst, *keys.T)
        pair = src * H + dst
        upairs, inv = np.unique(pair, return_inverse=True)
        tables = self._path_tables(upairs // H, upairs % H)
        hops = np.array([t.shape[1] for t in tables], dtype=np.int64)
        counts = np.array([t.shape[0] for t in tables], dtype=np.uint64)
        length = hops[inv]
        ptr = np.zeros(F + 1, dtype=np.int64)
        np.cumsum(length, out=ptr[1:])
        choice = (h % counts[inv]).astype(np.int64)
        # every table flattened into one array; flow f's path starts at its pair's table, row choice[f]
        flat = np.concatenate([t.reshape(-1) for t in tables])
        base = np.zeros(len(tables), dtype=np.int64)
        np.cumsum((hops * counts.astype(np.int64))[:-1], out=base[1:])
        start = base[inv] + choice * length
        links = flat[np.repeat(start - ptr[:-1], length) + np.arange(int(ptr[-1]))]
        return ptr, links

    def _routed_paths(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The router's routes of host pairs as CSR ``(ptr, links)``, checked to chain from src to dst."""
        F = len(src)
        pidx, links = self.router(src, dst)
        pidx = np.asarray(pidx, dtype=np.int64).reshape(-1)
        links = np.asarray(links, dtype=np.int64).reshape(-1)
        if pidx.shape != links.shape:
            raise TopologyError(f"{self.name}: router returned {pidx.size} pair indices but {links.size} links")
        bad = np.flatnonzero((pidx < 0) | (pidx >= F) | (links < 0) | (links >= self.num_links))
        if bad.size:
            raise TopologyError(f"{self.name}: router returned pair {pidx[bad[0]]} / link {links[bad[0]]} "
                                f"out of range (pairs 0..{F - 1}, links 0..{self.num_links - 1})")
        if not (pidx[1:] >= pidx[:-1]).all():  # group each pair's links, keeping route order
            order = np.argsort(pidx, kind="stable")
            pidx, links = pidx[order], links[order]
        ptr = np.zeros(F + 1, dtype=np.int64)
        np.cumsum(np.bincount(pidx, minlength=F), out=ptr[1:])
        # each route must leave the source host, chain tail->head, and end at the destination host
        empty = ptr[1:] == ptr[:-1]
        ok = empty == (src == dst)
        fe = np.flatnonzero(~empty)
        first = ptr[fe]
        ok[fe] &= ((self.link_src[links[first]] == self._host_node[src[fe]])
                   & (self.link_dst[links[ptr[fe + 1] - 1]] == self._host_node[dst[fe]]))
        inner = np.ones(len(links), dtype=bool)
        inner[first] = False
        broken = np.flatnonzero(inner & (np.r_[-1, self.link_dst[links[:-1]]] != self.link_src[links]))
        ok[pidx[broken]] = False
        if not ok.all():
            f = int(np.flatnonzero(~ok)[0])
            route = [self.describe_link(int(l)) for l in links[ptr[f]:ptr[f + 1]]]
            raise TopologyError(f"{self.name}: router route {self.hosts[src[f]]!r} -> {self.hosts[dst[f]]!r} "
                                f"is not a chain of links between them: {route}")
        return ptr, links

    def path_latency(self, path: Sequence[int] | np.ndarray) -> float:
        """Sum of link latencies along ``path`` (link ids), in seconds."""
        return float(self.latency[np.asarray(path, dtype=np.int64)].sum())

    # ------------------------------------------------------------ variations
    def degraded(self, rates: Mapping[int, float]) -> "Topology":
        """A copy with some link capacities replaced: ``{link_id: bit/s}``.

        Routing (fewest hops) is unchanged, so the path cache is shared.

        Raises:
            TopologyError: unknown link id, or a capacity that is not > 0 or is above the
                link's own (a degrade never raises a capacity).
        """
        out = copy.copy(self)
        cap = self.capacity.copy()
        for lid, rate in rates.items():
            if isinstance(lid, bool) or not isinstance(lid, (int, np.integer)) or not 0 <= lid < self.num_links:
                raise TopologyError(f"degraded: link id {lid!r} out of range 0..{self.num_links - 1}")
            if not float(rate) > 0:
                raise TopologyError(f"degraded: link {lid} capacity must be > 0 bit/s, got {rate!r}")
            if float(rate) > self.capacity[int(lid)]:
                raise TopologyError(f"degraded: link {lid} ({self.describe_link(int(lid))}) capacity "
                                    f"{float(rate):g} bit/s is above its own {self.capacity[int(lid)]:g} bit/s")
            cap[int(lid)] = float(rate)
        cap.flags.writeable = False
        out.capacity = cap
        out.graph = self.graph.copy()
        for u, v, d in out.graph.edges(data=True):
            d["capacity"] = float(cap[d["link"]])
        if rates:
            out.name = f"{self.name} (degraded {len(rates)} links)"
        return out

    def link_kinds(self) -> np.ndarray:
        """What each link is, shape ``(L,)`` of str: ``"nvlink"`` (GPU <-> NVSwitch), ``"pcie"`` (GPU <->
        NIC), ``"nic"`` (NIC <-> fabric switch) or ``"fabric"`` (everything else; every link of a
        topology without servers)."""
        if self.servers is None:
            return np.full(self.num_links, "fabric")
        return self.servers.link_kind_names()

    def network_cables(self) -> np.ndarray:
        """Rows of :meth:`cables` that are NIC or fabric cables (not NVLink, not PCIe): the cables a
        random gray failure of the network can hit. Every cable of a topology without servers."""
        cables = self.cables()
        if self.servers is None:
            return cables
        net = np.zeros(self.num_links, dtype=bool)
        net[self.servers.fabric_links()] = True   # NIC and fabric links
        return cables[net[cables[:, 0]]]

    def link_rows(self) -> list[dict]:
        """Every directed link as a dict: ``link`` id, ``cable`` id (row of :meth:`cables`),
        ``src``/``dst`` node names, ``kind`` (:meth:`link_kinds`), ``capacity`` (bit/s), ``latency``
        (s); in link-id order."""
        cable_of = np.full(self.num_links, -1, dtype=np.int64)
        for c, pair in enumerate(self.cables().tolist()):
            for l in pair:
                if l >= 0:
                    cable_of[l] = c
        kind = self.link_kinds()
        return [{"link": l, "cable": int(cable_of[l]), "src": self.nodes[self.link_src[l]],
                 "dst": self.nodes[self.link_dst[l]], "kind": str(kind[l]), "capacity": float(self.capacity[l]),
                 "latency": float(self.latency[l])} for l in range(self.num_links)]

    def describe_link(self, lid: int) -> str:
        """``"u->v"`` for link ``lid``."""
        return f"{self.nodes[self.link_src[lid]]}->{self.nodes[self.link_dst[lid]]}"

"""Builders for the data-centre fabrics REACT evaluates on (§7.1, Appendix B).

Every builder takes ``rate`` (bit/s, default 100 Gbps) and ``latency`` (s per
link, default 1 µs, REACT §7.3) applied to every link; use
:meth:`Topology.degraded` to change single links. Hosts are named ``h0``,
``h1``, ... so that host id ``i`` is node ``"h{i}"``.
"""

from __future__ import annotations

import networkx as nx

from .graph import Topology, TopologyError, add_cable, check_size

__all__ = ["star", "fat_tree", "leaf_spine", "alibaba", "full_mesh_tors", "DEFAULT_RATE", "DEFAULT_LATENCY"]

DEFAULT_RATE = 100e9
DEFAULT_LATENCY = 1e-6


def _positive_int(value, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise TopologyError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return value


def _check_link(rate: float, latency: float) -> None:
    if not float(rate) > 0:
        raise TopologyError(f"rate: must be > 0 bit/s, got {rate!r}")
    if not float(latency) >= 0:
        raise TopologyError(f"latency: must be >= 0 s, got {latency!r}")


def _hosts_on(g: nx.DiGraph, switch: str, first: int, count: int, rate: float, latency: float) -> None:
    for h in range(first, first + count):
        g.add_node(f"h{h}", kind="host")
        add_cable(g, f"h{h}", switch, rate, latency)


def _suffix(rate: float, latency: float) -> str:
    parts = []
    if rate != DEFAULT_RATE:
        parts.append(f"rate={rate / 1e9:g}G")
    if latency != DEFAULT_LATENCY:
        parts.append(f"latency={latency * 1e6:g}us")
    return ("," + ",".join(parts)) if parts else ""


def star(num_hosts: int, rate: float = DEFAULT_RATE, latency: float = DEFAULT_LATENCY) -> Topology:
    """All hosts on one switch ``s0`` (REACT §4.3, §7.3.3). Host-to-host paths have 2 links.

    Raises:
        TopologyError: ``num_hosts`` < 1 or a bad rate/latency.
    """
    n = _positive_int(num_hosts, "hosts")
    _check_link(rate, latency)
    check_size(f"star:hosts={n}", n, 2 * n)
    g = nx.DiGraph()
    g.add_node("s0", kind="switch")
    _hosts_on(g, "s0", 0, n, rate, latency)
    return Topology(g, f"star:hosts={n}{_suffix(rate, latency)}")


def fat_tree(k: int, rate: float = DEFAULT_RATE, latency: float = DEFAULT_LATENCY) -> Topology:
    """The 3-layer k-ary fat-tree of Al-Fares et al. (SIGCOMM 2008), REACT's Clos topology.

    k pods, each with k/2 edge and k/2 aggregation switches; (k/2)^2 core switches;
    k/2 hosts per edge switch, k^3/4 hosts in all (k=4: 16, k=8: 128). Aggregation
    switch j of every pod joins cores ``j*k/2 .. (j+1)*k/2 - 1``. Nodes:
    ``edge{pod}_{i}``, ``agg{pod}_{j}``, ``core{c}``. Paths: 2 links under one
    edge switch, 4 within a pod (k/2 choices), 6 across pods ((k/2)^2 choices).

    Raises:
        TopologyError: k not an even integer >= 2, or a bad rate/latency.
    """
    k = _positive_int(k, "k", 2)
    if k % 2:
        raise TopologyError(f"k: a fat-tree needs an even k, got {k}")
    _check_link(rate, latency)
    check_size(f"fat-tree:k={k}", k ** 3 // 4, 3 * k ** 3 // 2)
    half = k // 2
    g = nx.DiGraph()
    host = 0
    for pod in range(k):  # hosts first so host ids follow pods and edge switches
        for i in range(half):
            g.add_node(f"edge{pod}_{i}", kind="switch")
            _hosts_on(g, f"edge{pod}_{i}", host, half, rate, latency)
            host += half
    for pod in range(k):
        for j in range(half):
            g.add_node(f"agg{pod}_{j}", kind="switch")
            for i in range(half):
                add_cable(g, f"edge{pod}_{i}", f"agg{pod}_{j}", rate, latency)
    for c in range(half * half):
        g.add_node(f"core{c}", kind="switch")
    for pod in range(k):
        for j in range(half):
            for c in range(j * half, (j + 1) * half):
                add_cable(g, f"agg{pod}_{j}", f"core{c}", rate, latency)
    return Topology(g, f"fat-tree:k={k}{_suffix(rate, latency)}")


def _two_tier(name: str, tors: int, uppers: int, hosts_per_tor: int, rate: float, latency: float,
              tor_prefix: str, upper_prefix: str) -> Topology:
    _check_link(rate, latency)
    check_size(name, tors * hosts_per_tor, 2 * tors * (hosts_per_tor + uppers))
    g = nx.DiGraph()
    for t in range(tors):
        g.add_node(f"{tor_prefix}{t}", kind="switch")
        _hosts_on(g, f"{tor_prefix}{t}", t * hosts_per_tor, hosts_per_tor, rate, latency)
    for u in range(uppers):
        g.add_node(f"{upper_prefix}{u}", kind="switch")
        for t in range(tors):
            add_cable(g, f"{tor_prefix}{t}", f"{upper_prefix}{u}", rate, latency)
    return Topology(g, name + _suffix(rate, latency))


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int, rate: float = DEFAULT_RATE,
               latency: float = DEFAULT_LATENCY) -> Topology:
    """A 2-tier leaf-spine (folded Clos): every leaf ``leaf{i}`` joins every spine ``spine{j}``;
    ``hosts_per_leaf`` hosts per leaf. Cross-leaf paths have 4 links and ``spines`` choices.

    Raises:
        TopologyError: a count < 1 or a bad rate/latency.
    """
    l = _positive_int(leaves, "leaves")
    s = _positive_int(spines, "spines")
    h = _positive_int(hosts_per_leaf, "hosts")
    return _two_tier(f"leaf-spine:leaves={l},spines={s},hosts={h}", l, s, h, rate, latency, "leaf", "spine")


def alibaba(tors: int = 48, aggs: int = 3, hosts_per_tor: int = 15, rate: float = DEFAULT_RATE,
            latency: float = DEFAULT_LATENCY) -> Topology:
    """An Alibaba-style fabric (REACT §7.1, from the Alibaba GPU cluster trace): each of
    ``tors`` ToRs (``tor{i}``) joined to each of ``aggs`` aggregation switches (``agg{j}``),
    each server on exactly one ToR. Defaults give the paper's 48 x 15 = 720 servers.

    Raises:
        TopologyError: a count < 1 or a bad rate/latency.
    """
    t = _positive_int(tors, "tors")
    a = _positive_int(aggs, "aggs")
    h = _positive_int(hosts_per_tor, "hosts")
    return _two_tier(f"alibaba:tors={t},aggs={a},hosts={h}", t, a, h, rate, latency, "tor", "agg")


def full_mesh_tors(tors: int, hosts_per_tor: int, rate: float = DEFAULT_RATE,
                   latency: float = DEFAULT_LATENCY) -> Topology:
    """ToRs ``tor{i}`` joined pairwise by one cable each (like REACT Fig 10(b), the testbed's
    fully connected switch groups); ``hosts_per_tor`` hosts per ToR. Cross-ToR paths: 3 links.

    Raises:
        TopologyError: a count < 1 or a bad rate/latency.
    """
    t = _positive_int(tors, "tors")
    h = _positive_int(hosts_per_tor, "hosts")
    _check_link(rate, latency)
    check_size(f"full-mesh:tors={t},hosts={h}", t * h, 2 * t * h + t * (t - 1))
    g = nx.DiGraph()
    for i in range(t):
        g.add_node(f"tor{i}", kind="switch")
        _hosts_on(g, f"tor{i}", i * h, h, rate, latency)
    for i in range(t):
        for j in range(i + 1, t):
            add_cable(g, f"tor{i}", f"tor{j}", rate, latency)
    return Topology(g, f"full-mesh:tors={t},hosts={h}{_suffix(rate, latency)}")

"""The dragonfly of Kim, Dally, Scott & Abts (ISCA 2008), with minimal routing.

Parameters (the paper's names): ``a`` routers per group, ``p`` hosts (terminals) per router,
``h`` global links per router. Routers of a group are joined all-to-all by local links;
the group has ``a·h`` global links, one to each of the other groups, so there are
``g = a·h + 1`` groups (the largest balanced dragonfly) and every pair of groups shares
exactly one global cable.

Global wiring ("consecutive"): global port ``k`` (0..a·h-1) of group i leads to group
``(i + k + 1) mod g`` and sits on router ``k // h`` of group i. The cable between groups i
and j therefore lands on router ``((j - i - 1) mod g) // h`` of i and
``((i - j - 1) mod g) // h`` of j.

Minimal routing (§4.1 of the paper): a flow goes up to its router, across at most one local
link to the router holding the global link to the destination group, over that global link,
across at most one local link in the destination group, and down: at most 3 router-to-router
hops (local–global–local), 5 links host to host. The route of every pair is fixed (one
global cable per group pair, one local link per router pair), so the topology carries a
fixed router and ECMP has nothing to choose. Adaptive (UGAL) and Valiant routing are not
built here.

Names: hosts ``h0, h1, ...`` (group-major, then router, then terminal: host id
``(i·a + r)·p + t``), routers ``g{i}r{r}``.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from .builders import DEFAULT_LATENCY, DEFAULT_RATE, _check_link, _positive_int, _suffix
from .graph import Topology, add_cable, check_size

__all__ = ["dragonfly", "dragonfly_gateway"]


def dragonfly_gateway(a: int, h: int) -> np.ndarray:
    """``gw[i, j]``: the router (0..a-1) of group i that holds the global cable to group j,
    shape ``(g, g)`` with g = a·h + 1 (-1 on the diagonal)."""
    g = a * h + 1
    i, j = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
    gw = ((j - i - 1) % g) // h
    gw[i == j] = -1
    return gw


def dragonfly(a: int, p: int, h: int, rate: float = DEFAULT_RATE, latency: float = DEFAULT_LATENCY) -> Topology:
    """A dragonfly with ``a·h + 1`` groups of ``a`` routers, ``p`` hosts per router and ``h``
    global links per router, minimal (local–global–local) routes (module docstring).

    Sizes: ``g·a·p`` hosts, ``g·a`` routers, and ``g·a·p + g·a(a-1)/2 + g(g-1)/2`` cables (host,
    local, global), each two directed links of ``rate`` bit/s and ``latency`` s.
    Example: ``a=4, p=2, h=2`` has 9 groups, 36 routers, 72 hosts.

    Raises:
        TopologyError: a count < 1, a bad rate/latency, or more than
            :data:`reactccl.topology.graph.MAX_LINKS` directed links (checked before building).
    """
    a = _positive_int(a, "a")
    p = _positive_int(p, "p")
    h = _positive_int(h, "h")
    _check_link(rate, latency)
    groups = a * h + 1
    R = groups * a
    check_size(f"dragonfly:a={a},p={p},h={h}", R * p,
               2 * (R * p + groups * a * (a - 1) // 2 + groups * (groups - 1) // 2))    # before building
    router = [f"g{i}r{r}" for i in range(groups) for r in range(a)]
    gr = nx.DiGraph()
    for x in range(R):
        gr.add_node(router[x], kind="switch")
        for t in range(p):
            gr.add_node(f"h{x * p + t}", kind="host")
            add_cable(gr, f"h{x * p + t}", router[x], rate, latency)
    for i in range(groups):
        for r in range(a):
            for s in range(r + 1, a):
                add_cable(gr, router[i * a + r], router[i * a + s], rate, latency)
    gw = dragonfly_gateway(a, h)
    for i in range(groups):
        for j in range(i + 1, groups):
            add_cable(gr, router[i * a + gw[i, j]], router[j * a + gw[j, i]], rate, latency)
    tab: dict[str, np.ndarray] = {}  # link tables of the router, filled once link ids exist

    def route(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        rs, rd = src // p, dst // p
        gs, gd = rs // a, rd // a
        other = gs != gd
        out_r = np.where(other, gs * a + gw[gs, gd], rd)   # last router in the source group
        in_r = np.where(other, gd * a + gw[gd, gs], rd)    # first router in the destination group
        rl = tab["router"]
        hops = np.stack([tab["up"][src],
                         np.where(out_r != rs, rl[rs, out_r], -1),
                         np.where(other, rl[out_r, in_r], -1),
                         np.where(in_r != rd, rl[in_r, rd], -1),
                         tab["down"][dst]], axis=1)
        hops[src == dst] = -1
        keep = hops >= 0
        return np.repeat(np.arange(len(src)), keep.sum(axis=1)), hops[keep]

    topo = Topology(gr, f"dragonfly:a={a},p={p},h={h}{_suffix(rate, latency)}", router=route)
    node = {n: k for k, n in enumerate(topo.nodes)}
    hosts = np.arange(R * p)
    up = np.array([topo.link_id(f"h{x}", router[x // p]) for x in hosts], dtype=np.int64)
    down = np.array([topo.link_id(router[x // p], f"h{x}") for x in hosts], dtype=np.int64)
    rlink = np.full((R, R), -1, dtype=np.int64)
    rnode = np.array([node[n] for n in router])
    is_router = np.full(len(topo.nodes), -1, dtype=np.int64)
    is_router[rnode] = np.arange(R)
    both = (is_router[topo.link_src] >= 0) & (is_router[topo.link_dst] >= 0)
    rlink[is_router[topo.link_src[both]], is_router[topo.link_dst[both]]] = np.flatnonzero(both)

    tab.update(up=up, down=down, router=rlink)
    return topo

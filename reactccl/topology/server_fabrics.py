"""Fabrics of multi-GPU servers: a rail-optimized two-tier fabric, and servers on any switched builder.

* :func:`rail` (``rail:servers=S,gpus=G``): NIC ``r`` of every server hangs off rail ``r``'s leaf
  switch(es) ``r{r}l{i}``; spines ``sp{j}`` join every leaf (NVIDIA's rail-optimized design,
  BASELINES.md "Servers"). Traffic between NICs of one rail stays under its leaf (or goes
  leaf - spine - leaf); between rails it crosses a spine.
* :func:`with_servers` (``fat-tree:k=8,gpus=8``): every host slot of a flat switched topology
  becomes a server whose K NICs (default one, shared by the G GPUs) take the slot's cable(s) to its
  switch at the slot's rate.

Servers are laid out and routed as :mod:`.servers` says (NVLink inside, NICs and PXN between).
Defaults (an H100-class server): NVLink 450 GB/s (3.6 Tbit/s) per GPU per direction, PCIe
64 GB/s (512 Gbit/s), on ``rail`` one 400 Gbit/s NIC per GPU; every link ``latency`` (1 µs).
"""

from __future__ import annotations

import math
import re

import networkx as nx

from .builders import DEFAULT_LATENCY, _check_link, _positive_int
from .graph import Topology, TopologyError, add_cable, check_size
from .servers import DEFAULT_NIC_RATE, DEFAULT_NVLINK, DEFAULT_PCIE, ServerLayout
from .units import UnitError, parse_rate

__all__ = ["rail", "with_servers", "split_server_items", "parse_server_rate", "SERVER_KEYS",
           "RAIL_SERVERS_PER_LEAF"]

#: Spec keys that describe the servers, on ``rail`` and on every switched builder.
SERVER_KEYS = ("gpus", "nics", "nvlink", "pcie", "pxn")

RAIL_SERVERS_PER_LEAF = 32
"""Servers per rail leaf by default (a scalable unit of NVIDIA's DGX SuperPOD: 32 servers, one
leaf per rail)."""

_BYTES_RATE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGtT]?)B/s\s*")
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}


def parse_server_rate(text: str, what: str) -> float:
    """A server link rate in bit/s: bits per second as :func:`~.units.parse_rate` reads them, a
    unit required (``3600G``, ``3.6T``, ``512Gbps``), or bytes per second written with ``B/s``
    (``450GB/s`` = 3.6e12 bit/s), the unit NVLink and PCIe are quoted in. ``450GB`` or ``450GBps``
    stay refused, as in every rate.

    Raises:
        UnitError: unparsable, a bare number, or not > 0.
    """
    m = _BYTES_RATE.fullmatch(str(text))
    if m:
        value = float(m.group(1)) * _PREFIX[m.group(2).lower()] * 8.0
        if not (math.isfinite(value) and value > 0):
            raise UnitError(f"{what}: must be a positive finite rate, got {text!r}")
        return value
    return parse_rate(text, what, require_unit=True)


def split_server_items(text: str, items: list[str]) -> tuple[list[str], dict[str, object]]:
    """Take the server keys (:data:`SERVER_KEYS`) out of a spec's ``KEY=VALUE`` items.

    Returns:
        ``(other items, {"gpus": int, "nics": int, "nvlink": bit/s, "pcie": bit/s, "pxn": bool})``
        with only the keys given.

    Raises:
        TopologyError: a key given twice or a bad value, named.
    """
    rest: list[str] = []
    out: dict[str, object] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if key not in SERVER_KEYS or not eq:
            rest.append(item)
            continue
        if key in out:
            raise TopologyError(f"topology {text!r}: key {key!r} given twice")
        try:
            if key in ("nvlink", "pcie"):
                out[key] = parse_server_rate(value, key)
            elif key == "pxn":
                if value.strip() not in ("0", "1"):
                    raise TopologyError(f"topology {text!r}: pxn must be 0 or 1, got {value!r}")
                out[key] = value.strip() == "1"
            else:
                out[key] = int(value)
        except (ValueError, UnitError) as exc:
            if isinstance(exc, TopologyError):
                raise
            raise TopologyError(f"topology {text!r}: bad value for {key!r}: {exc}") from None
    return rest, out


def _check_server(gpus: int, nics: int, nvlink: float, pcie: float) -> tuple[int, int]:
    G = _positive_int(gpus, "gpus")
    K = _positive_int(nics, "nics")
    if K > G:
        raise TopologyError(f"nics: a server of {G} GPUs has at most {G} NICs (one per GPU), got {K}")
    for what, r in (("nvlink", nvlink), ("pcie", pcie)):
        if not (math.isfinite(float(r)) and float(r) > 0):
            raise TopologyError(f"{what}: must be > 0 bit/s, got {r!r}")
    return G, K


def _add_server(g: nx.DiGraph, s: int, G: int, K: int, nvlink: float, pcie: float, latency: float) -> list[str]:
    """Add server ``s`` (GPUs, NVSwitch, NICs and the NVLink and PCIe cables); its NIC names."""
    gpus = [f"s{s}g{j}" for j in range(G)]
    nics = [f"s{s}nic{k}" for k in range(K)]
    for gpu in gpus:
        g.add_node(gpu, kind="host")
    g.add_node(f"s{s}nvs", kind="switch")
    for nic in nics:
        g.add_node(nic, kind="switch")
    for j, gpu in enumerate(gpus):
        add_cable(g, gpu, f"s{s}nvs", nvlink, latency)
        add_cable(g, gpu, nics[j * K // G], pcie, latency)
    return nics


def _server_cables(S: int, G: int, K: int) -> int:
    """Directed links inside S servers plus their NIC cables."""
    return S * (4 * G + 2 * K)


def _rate_suffix(key: str, value: float, default: float) -> str:
    return "" if value == default else f",{key}={value / 1e9:g}G"


def rail(servers: int, gpus: int, nics: int | None = None, nvlink: float = DEFAULT_NVLINK,
         pcie: float = DEFAULT_PCIE, rate: float = DEFAULT_NIC_RATE, latency: float = DEFAULT_LATENCY,
         spines: int | None = None, leaves_per_rail: int | None = None, storage: int | None = None,
         pxn: bool = True) -> Topology:
    """A rail-optimized two-tier fabric of ``servers`` servers of ``gpus`` GPUs and ``nics`` NICs.

    Rail ``r`` (one per NIC index, ``nics`` rails) has ``leaves_per_rail`` leaves ``r{r}l{i}``;
    server ``s``'s NIC ``r`` sits on leaf ``r{r}l{s // ceil(servers / leaves_per_rail)}``. Every leaf
    joins every spine ``sp{j}``. ``storage`` plain hosts ``st{i}`` (not GPUs: sources of background
    traffic) sit on the leaves in turn, rail-major. Fabric, NIC and storage links run at ``rate``.

    Defaults: ``nics = gpus`` (one NIC per GPU), NVLink 3.6 Tbit/s (450 GB/s), PCIe 512 Gbit/s
    (64 GB/s), ``rate`` 400 Gbit/s, ``latency`` 1 µs on every link, ``leaves_per_rail =
    ceil(servers / 32)``, ``spines`` = servers per leaf (as many uplinks as NICs per leaf: the
    leaves do not oversubscribe), ``storage`` = one per leaf, PXN on.

    Example: ``rail(2, 2)`` has GPUs ``s0g0 s0g1 s1g0 s1g1`` (hosts 0..3), NICs ``s{s}nic{r}`` on
    leaves ``r0l0``, ``r1l0``, two spines, storage ``st0`` on ``r0l0`` and ``st1`` on ``r1l0``
    (hosts 4, 5). ``s0g0 -> s1g1`` goes ``s0g0 -> s0nvs -> s0g1 -> s0nic1 -> r1l0 -> s1nic1 -> s1g1``
    (PXN); with ``pxn=False`` it leaves by ``s0nic0`` and crosses a spine.

    Raises:
        TopologyError: a count < 1 (storage < 0), ``nics > gpus``, ``leaves_per_rail > servers``,
            a bad rate or latency, or more links than :data:`~.graph.MAX_LINKS`.
    """
    S = _positive_int(servers, "servers")
    G = _positive_int(gpus, "gpus")
    G, K = _check_server(G, G if nics is None else nics, nvlink, pcie)
    _check_link(rate, latency)
    L = math.ceil(S / RAIL_SERVERS_PER_LEAF) if leaves_per_rail is None else _positive_int(leaves_per_rail,
                                                                                           "leaves_per_rail")
    if L > S:
        raise TopologyError(f"leaves_per_rail: {L} leaves per rail for {S} servers leave a leaf empty")
    per_leaf = math.ceil(S / L)
    P = per_leaf if spines is None else _positive_int(spines, "spines")
    N = K * L if storage is None else _positive_int(storage, "storage", 0)
    check_size(f"rail:servers={S},gpus={G}", S * G + N, _server_cables(S, G, K) + 2 * K * L * P + 2 * N)
    g = nx.DiGraph()
    nic_names = [_add_server(g, s, G, K, nvlink, pcie, latency) for s in range(S)]
    leaves = [f"r{r}l{i}" for r in range(K) for i in range(L)]
    for leaf in leaves:
        g.add_node(leaf, kind="switch")
    for s in range(S):
        for r in range(K):
            add_cable(g, nic_names[s][r], f"r{r}l{s // per_leaf}", rate, latency)
    for j in range(P):
        g.add_node(f"sp{j}", kind="switch")
        for leaf in leaves:
            add_cable(g, leaf, f"sp{j}", rate, latency)
    for i in range(N):
        g.add_node(f"st{i}", kind="host")
        add_cable(g, f"st{i}", leaves[i % len(leaves)], rate, latency)
    name = (f"rail:servers={S},gpus={G}" + ("" if K == G else f",nics={K}")
            + _rate_suffix("nvlink", nvlink, DEFAULT_NVLINK) + _rate_suffix("pcie", pcie, DEFAULT_PCIE)
            + _rate_suffix("rate", rate, DEFAULT_NIC_RATE)
            + ("" if latency == DEFAULT_LATENCY else f",latency={latency * 1e6:g}us")
            + ("" if leaves_per_rail is None else f",leaves_per_rail={L}") + ("" if spines is None else f",spines={P}")
            + ("" if storage is None else f",storage={N}") + ("" if pxn else ",pxn=0"))
    topo = Topology(g, name)
    topo.servers = ServerLayout.from_names(topo, S, G, K, nvlink=nvlink, pcie=pcie, nic_rate=rate, pxn=pxn)
    return topo


def with_servers(flat: Topology, gpus: int, nics: int = 1, nvlink: float = DEFAULT_NVLINK,
                 pcie: float = DEFAULT_PCIE, pxn: bool = False) -> Topology:
    """``flat`` with every host slot turned into a server (``fat-tree:k=8,gpus=8``).

    Host ``i`` of ``flat`` becomes server ``i``: GPUs ``s{i}g0..``, NVSwitch ``s{i}nvs`` and NICs
    ``s{i}nic0..`` whose cables go, one each, to the switch host ``i`` hung off, at that cable's
    rate and latency (default one NIC shared by all GPUs, the "shared NIC" of REACT's academic
    clusters); NVLink and PCIe cables take that latency too. Switches keep their names and cables.
    PXN is off by default (with one NIC there is nothing to choose).

    Raises:
        TopologyError: ``flat`` already has servers or fixed routes (dragonfly, tori: routes are
            defined per host), a host with other than one neighbour, a bad count or rate, or more
            links than :data:`~.graph.MAX_LINKS`.
    """
    if flat.servers is not None:
        raise TopologyError(f"{flat.name}: already a topology of servers")
    if flat.router is not None:
        raise TopologyError(f"{flat.name}: gpus= needs a switched builder routed by ECMP (star, fat-tree, "
                            "leaf-spine, alibaba, full-mesh); this one has fixed per-host routes")
    G, K = _check_server(gpus, nics, nvlink, pcie)
    S = flat.num_hosts
    check_size(f"{flat.name},gpus={G}", S * G, flat.num_links - 2 * S + _server_cables(S, G, K))
    slot: dict[str, tuple[str, float, float]] = {}
    for h in flat.hosts:
        nbrs = list(flat.graph.successors(h))
        if len(nbrs) != 1:
            raise TopologyError(f"{flat.name}: host {h!r} has {len(nbrs)} neighbours; a server slot needs one")
        d = flat.graph.edges[h, nbrs[0]]
        slot[h] = (nbrs[0], d["capacity"], d["latency"])
    g = nx.DiGraph()
    nic_rate = 0.0
    for n, kind in flat.graph.nodes(data="kind"):
        if kind != "host":
            g.add_node(n, kind=kind)
    for i, h in enumerate(flat.hosts):
        switch, cap, lat = slot[h]
        for nic in _add_server(g, i, G, K, nvlink, pcie, lat):
            add_cable(g, nic, switch, cap, lat)
        nic_rate = max(nic_rate, cap)
    for u, v, d in flat.graph.edges(data=True):
        if u not in slot and v not in slot:
            g.add_edge(u, v, capacity=d["capacity"], latency=d["latency"])
    name = (f"{flat.name},gpus={G}" + ("" if K == 1 else f",nics={K}") + _rate_suffix("nvlink", nvlink, DEFAULT_NVLINK)
            + _rate_suffix("pcie", pcie, DEFAULT_PCIE) + (",pxn=1" if pxn else ""))
    topo = Topology(g, name)
    topo.servers = ServerLayout.from_names(topo, S, G, K, nvlink=nvlink, pcie=pcie, nic_rate=nic_rate, pxn=pxn)
    return topo

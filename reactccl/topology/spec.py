"""Topologies from short text specs (``fat-tree:k=4``) and placement of ranks on hosts.

Spec grammar: ``NAME[:KEY=VALUE[,KEY=VALUE...]]`` (``:`` also separates items, as in
``dragonfly:a=4:p=2:h=2``); every builder also accepts
``rate=`` (e.g. ``100G``) and ``latency=`` (e.g. ``1us``). Other modules add
builders with :func:`register_topology`. The direct-connect fabrics of SP-allreduce
(:mod:`reactccl.topology.torus`) take a shape instead of keys, with the grammar of
``reactccl sp --fabric``: ``torus:AxB[xC...]``, ``hyperx:NxN``, ``spineleaf:LEAVESxQ``,
optionally followed by ``,rate=...,latency=...``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..suggest import did_you_mean
from . import builders
from .dragonfly import dragonfly
from .graph import Topology, TopologyError
from .server_fabrics import rail, split_server_items, with_servers
from .torus import (DEFAULT_HOP_LATENCY, DEFAULT_LINK_RATE, HyperXGeometry, SpineLeafGeometry, TorusGeometry,
                    fabric_topology)
from .units import UnitError, parse_rate, parse_time

__all__ = ["parse_topology", "register_topology", "placement", "TOPOLOGIES", "FABRICS"]


@dataclass(frozen=True)
class _Entry:
    builder: Callable[..., Topology]
    keys: dict[str, str]  # spec key -> builder keyword
    defaults: dict[str, int]
    example: str
    optional: frozenset[str] = frozenset()  # keys that may be left out (the builder's default)


TOPOLOGIES: dict[str, _Entry] = {}


def register_topology(name: str, builder: Callable[..., Topology], keys: dict[str, str],
                      example: str, defaults: dict[str, int] | None = None,
                      optional: Sequence[str] = ()) -> None:
    """Make ``builder`` reachable from :func:`parse_topology` as ``name``.

    Args:
        keys: integer spec keys mapped to builder keywords, e.g. ``{"k": "k"}``.
        example: a valid spec shown in error messages.
        defaults: values for keys the spec may omit.
        optional: keys the spec may omit, left to the builder's own default.
    """
    if name in TOPOLOGIES:
        raise ValueError(f"topology {name!r} registered twice")
    TOPOLOGIES[name] = _Entry(builder, dict(keys), dict(defaults or {}), example, frozenset(optional))


register_topology("star", builders.star, {"hosts": "num_hosts"}, "star:hosts=18")
register_topology("fat-tree", builders.fat_tree, {"k": "k"}, "fat-tree:k=4")
register_topology("leaf-spine", builders.leaf_spine,
                  {"leaves": "leaves", "spines": "spines", "hosts": "hosts_per_leaf"},
                  "leaf-spine:leaves=4,spines=2,hosts=4")
register_topology("alibaba", builders.alibaba, {"tors": "tors", "aggs": "aggs", "hosts": "hosts_per_tor"},
                  "alibaba", defaults={"tors": 48, "aggs": 3, "hosts": 15})
register_topology("full-mesh", builders.full_mesh_tors, {"tors": "tors", "hosts": "hosts_per_tor"},
                  "full-mesh:tors=4,hosts=2")
register_topology("dragonfly", dragonfly, {"a": "a", "p": "p", "h": "h"}, "dragonfly:a=4,p=2,h=2")
register_topology("rail", rail, {"servers": "servers", "spines": "spines", "leaves_per_rail": "leaves_per_rail",
                                 "storage": "storage"}, "rail:servers=4,gpus=8",
                  optional=("spines", "leaves_per_rail", "storage"))


#: Shape-spec fabrics of :mod:`reactccl.topology.torus`: name -> (shape, rule, example).
FABRICS: dict[str, tuple[str, str, str]] = {
    "torus": ("AxB[xC...]", "every side >= 3", "torus:8x8"),
    "hyperx": ("NxN", "equal sides >= 2", "hyperx:8x8"),
    "spineleaf": ("LEAVESxQ", "LEAVES leaves of Q hosts, Q spines; both >= 1", "spineleaf:4x8"),
}


def _link_items(text: str, name: str, items: list[str], int_keys: Sequence[str],
                example: str) -> tuple[dict[str, float], dict[str, int]]:
    """``KEY=VALUE`` items -> (``{"rate": bit/s, "latency": s}`` as given, ``{int key: value}``)."""
    link: dict[str, float] = {}
    given: dict[str, int] = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq:
            raise TopologyError(f"topology {text!r}: expected KEY=VALUE, got {item!r}")
        if key in link or key in given:
            raise TopologyError(f"topology {text!r}: key {key!r} given twice")
        try:
            if key == "rate":
                link["rate"] = parse_rate(value, "rate")
            elif key == "latency":
                link["latency"] = parse_time(value, "latency", allow_zero=True)
            elif key in int_keys:
                given[key] = int(value)
            else:
                allowed = sorted(int_keys) + ["latency", "rate"]
                raise TopologyError(f"topology {text!r}: unknown key {key!r} for {name}; "
                                    f"allowed: {', '.join(allowed)} (e.g. {example})")
        except (ValueError, UnitError) as exc:
            if isinstance(exc, TopologyError):
                raise
            raise TopologyError(f"topology {text!r}: bad value for {key!r}: {exc}") from None
    return link, given


def _fabric(text: str, name: str, items: list[str]) -> Topology:
    """A torus, HyperX or spine-leaf from ``items`` = ``[SHAPE, KEY=VALUE, ...]`` (see :data:`FABRICS`)."""
    form, rule, example = FABRICS[name]
    bad = TopologyError(f"topology {text!r}: expected {name}:{form} ({rule}), e.g. {example} "
                        f"or {example},rate=400G,latency=400ns")
    if not items or "=" in items[0]:
        raise bad
    try:
        shape = tuple(int(v) for v in items[0].lower().split("x"))
    except ValueError:
        raise bad from None
    sides = "x".join(map(str, shape))
    if name == "torus" and min(shape) < 3:
        raise TopologyError(f"topology {text!r}: every torus side must be >= 3 (two distinct neighbours per "
                            f"dimension), got {sides}")
    if name == "hyperx" and (len(set(shape)) != 1 or shape[0] < 2):
        raise TopologyError(f"topology {text!r}: HyperX sides must be equal and >= 2, got {sides}")
    if name == "spineleaf" and (len(shape) != 2 or min(shape) < 1):
        raise TopologyError(f"topology {text!r}: expected spineleaf:{form} ({rule}), got {sides}")
    link, _ = _link_items(text, name, items[1:], (), example)
    rate, latency = link.get("rate", DEFAULT_LINK_RATE), link.get("latency", DEFAULT_HOP_LATENCY)
    if name == "torus":
        geom = TorusGeometry(shape)
    elif name == "hyperx":
        geom = HyperXGeometry(shape)
    else:
        geom = SpineLeafGeometry(q=shape[1], leaves=shape[0])
    topo = fabric_topology(geom, rate, latency)
    suffix = (f",rate={rate / 1e9:g}G" if rate != DEFAULT_LINK_RATE else "") + \
             (f",latency={latency * 1e6:g}us" if latency != DEFAULT_HOP_LATENCY else "")
    topo.name = f"{name}:{sides}{suffix}"
    return topo


def parse_topology(spec: str) -> Topology:
    """Build the topology a spec names (names are case-insensitive).

    Switched fabrics (ECMP over fewest-hop paths; links 100 Gbit/s and 1 µs by default):
    ``star:hosts=18``, ``fat-tree:k=4``, ``leaf-spine:leaves=4,spines=2,hosts=4``,
    ``alibaba``, ``full-mesh:tors=4,hosts=2``, with ``rate=``/``latency=`` keys, e.g.
    ``fat-tree:k=4,rate=100G,latency=1us``. ``dragonfly:a=4,p=2,h=2`` (Kim et al. 2008:
    a·h+1 groups of ``a`` routers, ``p`` hosts per router, ``h`` global links per router)
    has fixed minimal local–global–local routes (:mod:`reactccl.topology.dragonfly`).

    Multi-GPU servers (:mod:`reactccl.topology.servers`: every GPU a host, NVLink inside a
    server, NICs between): ``rail:servers=S,gpus=G`` is a rail-optimized two-tier fabric (NIC r of
    every server on rail r's leaf, spines above; keys ``nics=`` (default G, one per GPU),
    ``nvlink=``, ``pcie=``, ``rate=`` (NICs and fabric, default 400 Gbit/s), ``latency=`` (every
    link, default 1 µs), ``spines=``, ``leaves_per_rail=``, ``storage=`` (plain hosts on the
    leaves, default one per leaf), ``pxn=0|1`` (default 1), see
    :func:`~reactccl.topology.server_fabrics.rail`). ``gpus=G`` on a switched builder
    (``fat-tree:k=8,gpus=8``) makes each host slot a server whose ``nics=`` NICs (default 1, shared)
    take the slot's cable at the fabric's rate (``pxn=`` default 0). NVLink defaults to 450 GB/s
    per GPU per direction and PCIe to 64 GB/s; ``nvlink=``/``pcie=`` take bits per second with a
    unit (``3600G``) or bytes per second written ``450GB/s``.

    Direct-connect fabrics of SP-allreduce (:func:`reactccl.topology.torus.fabric_topology`:
    hosts ``n0..n{p-1}`` in row-major order, each flow on the geometry's fixed route;
    links 400 Gbit/s and 400 ns per hop by default, SP-allreduce §7.1):
    ``torus:AxB[xC...]`` (sides >= 3, dimension-order routes), ``hyperx:NxN`` (equal
    sides >= 2, dimension-order routes), ``spineleaf:LEAVESxQ`` (LEAVES leaves of Q hosts,
    Q spines; routes through the sender's spine), e.g. ``torus:8x8,rate=100G,latency=1us``.

    Raises:
        TopologyError: unknown name, unknown or missing key, a bad shape or value (named).
    """
    text = str(spec).strip()
    name, _, rest = text.partition(":")
    name = name.strip().lower().replace("_", "-")
    items = [p.strip() for p in rest.replace(":", ",").split(",") if p.strip()]
    if name not in TOPOLOGIES and name not in FABRICS:
        known = sorted([*TOPOLOGIES, *FABRICS])
        raise TopologyError(f"topology {text!r}: unknown name {name!r}{did_you_mean(name, known)}; "
                            f"known: {', '.join(known)}")
    items, server = split_server_items(text, items)
    if server and (name in FABRICS or name == "dragonfly"):
        raise TopologyError(f"topology {text!r}: {'/'.join(sorted(server))} describe multi-GPU servers, which "
                            f"sit on rail or a switched builder (star, fat-tree, leaf-spine, alibaba, full-mesh), "
                            f"not on {name}, whose routes are fixed per host")
    if server and "gpus" not in server:
        raise TopologyError(f"topology {text!r}: {'/'.join(sorted(server))} need gpus=G (GPUs per server), "
                            f"e.g. {name}:...,gpus=8")
    if name in FABRICS:
        return _fabric(text, name, items)
    entry = TOPOLOGIES[name]
    kwargs: dict[str, object]
    kwargs, given = _link_items(text, name, items, tuple(entry.keys), entry.example)
    for key, kw in entry.keys.items():
        if key in given:
            kwargs[kw] = given[key]
        elif key in entry.defaults:
            kwargs[kw] = entry.defaults[key]
        elif key not in entry.optional:
            raise TopologyError(f"topology {text!r}: missing key {key!r} (e.g. {entry.example})")
    if name == "rail":
        if "gpus" not in server:
            raise TopologyError(f"topology {text!r}: missing key 'gpus' (e.g. {entry.example})")
        return entry.builder(**kwargs, **server)
    topo = entry.builder(**kwargs)
    return with_servers(topo, **server) if server else topo  # type: ignore[arg-type]


def placement(topology: Topology, num_ranks: int, spec: str | Sequence[int] | np.ndarray = "first",
              seed: int = 0) -> np.ndarray:
    """Host id of each rank, shape ``(num_ranks,)``.

    Args:
        spec: ``"first"`` (hosts 0..N-1), ``"random"`` (N distinct hosts in random order,
            drawn with ``seed``), an explicit sequence of host ids or names, or such a list as
            text (``"0,5,9"``). On a topology of servers (``topology.servers``) ``"first"`` puts
            rank r on GPU r (server r // G, local r % G) and ``"random"`` takes ceil(N / G) whole
            servers in random order, keeping the local order, so a job shares a server with no
            other unless given an explicit list.

    Raises:
        TopologyError: too few hosts (GPUs on servers), a repeated or unknown host, or a wrong length.
    """
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, (int, np.integer)) or num_ranks < 1:
        raise TopologyError(f"ranks: expected an integer >= 1, got {num_ranks!r}")
    n, H = int(num_ranks), topology.num_hosts
    layout = topology.servers
    if layout is not None and isinstance(spec, str) and spec.strip().lower() in ("first", "random"):
        if n > layout.num_gpus:
            raise TopologyError(f"placement: {n} ranks need {n} GPUs but {topology.name} has {layout.num_gpus} "
                                f"({layout.S} servers x {layout.G})")
        if spec.strip().lower() == "first":
            return layout.gpu_host.reshape(-1)[:n].astype(np.int64)
        order = np.random.default_rng(seed).choice(layout.S, size=-(-n // layout.G), replace=False)
        return layout.gpu_host[order].reshape(-1)[:n].astype(np.int64)
    if isinstance(spec, str) and spec.strip().lower() in ("first", "random"):
        if n > H:
            raise TopologyError(f"placement: {n} ranks need {n} hosts but {topology.name} has {H}")
        if spec.strip().lower() == "first":
            return np.arange(n, dtype=np.int64)
        rng = np.random.default_rng(seed)
        return rng.choice(H, size=n, replace=False).astype(np.int64)
    items = [s.strip() for s in spec.split(",") if s.strip()] if isinstance(spec, str) else list(spec)
    hosts = np.array([topology.host_id(int(x) if isinstance(x, str) and x.isdigit() else x) for x in items],
                     dtype=np.int64)
    if len(hosts) != n:
        raise TopologyError(f"placement: {len(hosts)} hosts given for {n} ranks")
    uniq, counts = np.unique(hosts, return_counts=True)
    if (counts > 1).any():
        raise TopologyError(f"placement: host {uniq[counts > 1][0]} given for more than one rank")
    return hosts

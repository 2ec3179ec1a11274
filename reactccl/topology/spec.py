"""Topologies from short text specs (``fat-tree:k=4``) and placement of ranks on hosts.

Spec grammar: ``NAME[:KEY=VALUE[,KEY=VALUE...]]``; every builder also accepts
``rate=`` (e.g. ``100G``) and ``latency=`` (e.g. ``1us``). Other modules add
builders with :func:`register_topology` (e.g. torus, HyperX).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from . import builders
from .graph import Topology, TopologyError
from .units import UnitError, parse_rate, parse_time

__all__ = ["parse_topology", "register_topology", "placement", "TOPOLOGIES"]


@dataclass(frozen=True)
class _Entry:
    builder: Callable[..., Topology]
    keys: dict[str, str]  # spec key -> builder keyword
    defaults: dict[str, int]
    example: str


TOPOLOGIES: dict[str, _Entry] = {}


def register_topology(name: str, builder: Callable[..., Topology], keys: dict[str, str],
                      example: str, defaults: dict[str, int] | None = None) -> None:
    """Make ``builder`` reachable from :func:`parse_topology` as ``name``.

    Args:
        keys: integer spec keys mapped to builder keywords, e.g. ``{"k": "k"}``.
        example: a valid spec shown in error messages.
        defaults: values for keys the spec may omit.
    """
    if name in TOPOLOGIES:
        raise ValueError(f"topology {name!r} registered twice")
    TOPOLOGIES[name] = _Entry(builder, dict(keys), dict(defaults or {}), example)


register_topology("star", builders.star, {"hosts": "num_hosts"}, "star:hosts=18")
register_topology("fat-tree", builders.fat_tree, {"k": "k"}, "fat-tree:k=4")
register_topology("leaf-spine", builders.leaf_spine,
                  {"leaves": "leaves", "spines": "spines", "hosts": "hosts_per_leaf"},
                  "leaf-spine:leaves=4,spines=2,hosts=4")
register_topology("alibaba", builders.alibaba, {"tors": "tors", "aggs": "aggs", "hosts": "hosts_per_tor"},
                  "alibaba", defaults={"tors": 48, "aggs": 3, "hosts": 15})
register_topology("full-mesh", builders.full_mesh_tors, {"tors": "tors", "hosts": "hosts_per_tor"},
                  "full-mesh:tors=4,hosts=2")


def parse_topology(spec: str) -> Topology:
    """Build the topology a spec names, e.g. ``star:hosts=18``, ``fat-tree:k=4``,
    ``leaf-spine:leaves=4,spines=2,hosts=4``, ``alibaba``, ``full-mesh:tors=4,hosts=2``,
    ``fat-tree:k=4,rate=100G,latency=1us``.

    Raises:
        TopologyError: unknown name, unknown or missing key, or a bad value (named).
    """
    text = str(spec).strip()
    name, _, rest = text.partition(":")
    name = name.strip().lower().replace("_", "-")
    if name not in TOPOLOGIES:
        raise TopologyError(f"topology {text!r}: unknown name {name!r}; known: {', '.join(sorted(TOPOLOGIES))}")
    entry = TOPOLOGIES[name]
    kwargs: dict[str, object] = {}
    given: dict[str, int] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq:
            raise TopologyError(f"topology {text!r}: expected KEY=VALUE, got {item!r}")
        try:
            if key == "rate":
                kwargs["rate"] = parse_rate(value, "rate")
            elif key == "latency":
                kwargs["latency"] = parse_time(value, "latency")
            elif key in entry.keys:
                given[key] = int(value)
            else:
                allowed = sorted(entry.keys) + ["latency", "rate"]
                raise TopologyError(f"topology {text!r}: unknown key {key!r} for {name}; "
                                    f"allowed: {', '.join(allowed)} (e.g. {entry.example})")
        except (ValueError, UnitError) as exc:
            if isinstance(exc, TopologyError):
                raise
            raise TopologyError(f"topology {text!r}: bad value for {key!r}: {exc}") from None
    for key, kw in entry.keys.items():
        if key in given:
            kwargs[kw] = given[key]
        elif key in entry.defaults:
            kwargs[kw] = entry.defaults[key]
        else:
            raise TopologyError(f"topology {text!r}: missing key {key!r} (e.g. {entry.example})")
    return entry.builder(**kwargs)


def placement(topology: Topology, num_ranks: int, spec: str | Sequence[int] | np.ndarray = "first",
              seed: int = 0) -> np.ndarray:
    """Host id of each rank, shape ``(num_ranks,)``.

    Args:
        spec: ``"first"`` (hosts 0..N-1), ``"random"`` (N distinct hosts in random order,
            drawn with ``seed``), an explicit sequence of host ids or names, or such a list as
            text (``"0,5,9"``).

    Raises:
        TopologyError: too few hosts, a repeated or unknown host, or a wrong length.
    """
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, (int, np.integer)) or num_ranks < 1:
        raise TopologyError(f"ranks: expected an integer >= 1, got {num_ranks!r}")
    n, H = int(num_ranks), topology.num_hosts
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

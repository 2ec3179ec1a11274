"""``run_simulation``: many epochs of one collective on a simulated network, summarised.

The library call behind ``reactccl simulate``: it generates (and verifies) the
pattern, places ranks, resolves background and degraded links, runs the epochs
on a :class:`SimulatedCluster` and returns a :class:`SimulationResult` with
per-epoch times, bandwidths and the slowest flows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..algorithms import generate
from ..algorithms.server_options import server_options
from ..contract import Controller, StaticController, drive
from ..pattern import CollectivePattern
from ..topology import Topology, parse_topology
from ..topology import placement as place_ranks
from ..topology.units import parse_bytes
from ..trace import EpochTrace
from ..traffic import Background, degrade_rates, parse_background
from .network import SimulatedCluster

__all__ = ["run_simulation", "SimulationResult"]


@dataclass
class SimulationResult:
    """Summary of a simulated run.

    Attributes:
        durations, algbw, busbw: per epoch, shape ``(E,)`` (s, bytes/s, bytes/s).
        slowest: the flows with the longest FCT over all epochs (dicts with epoch, flow,
            step, src, dst, src_host, dst_host, bytes, start, end, fct).
        traces: every epoch's trace when ``keep_traces`` was set, else only the last.
        background: resolved long-lived flows as ``(src host name, dst host name)``.
        degraded: ``{link "u->v": bit/s}``.
        placement_hosts: the host name of each rank (``h3`` on switched fabrics, ``n3`` on tori).
        fixed_routes: the topology routes every pair on one fixed route (tori, HyperX,
            spine-leaf, dragonfly), so ``ecmp_ports`` changes nothing.
        wall_s, events: simulator wall time (s) and events processed.
        order: the execution order, ``"step"`` or ``"data"`` (:mod:`reactccl.pattern.order`).
    """

    algorithm: str
    collective: str
    num_ranks: int
    num_flows: int
    topology: str
    num_hosts: int
    message_bytes: float
    placement: np.ndarray
    seed: int
    ecmp_ports: int
    durations: np.ndarray
    algbw: np.ndarray
    busbw: np.ndarray
    slowest: list[dict[str, Any]]
    background: list[tuple[str, str]]
    bulk: list[dict[str, Any]]
    degraded: dict[str, float]
    traces: list[EpochTrace] = field(repr=False)
    wall_s: float = 0.0
    events: int = 0
    controller: Any = field(default=None, repr=False)
    pattern_changes: int = 0
    placement_hosts: list[str] = field(default_factory=list)
    fixed_routes: bool = False
    order: str = "step"
    header_efficiency: float = 1.0

    @property
    def epochs(self) -> int:
        """Number of epochs E."""
        return len(self.durations)

    def stats(self) -> dict[str, float]:
        """p50, p95, mean, min, max epoch time (s) and mean algbw/busbw (bytes/s)."""
        d = self.durations
        return {"p50_s": float(np.percentile(d, 50)), "p95_s": float(np.percentile(d, 95)),
                "mean_s": float(d.mean()), "min_s": float(d.min()), "max_s": float(d.max()),
                "algbw_Bps": float(self.algbw.mean()), "busbw_Bps": float(self.busbw.mean())}

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready document (schema ``reactccl.simulate/1``); an undefined bandwidth (``nan``, an
        empty collective) is written as ``null``."""
        def nums(a) -> list:
            return [None if x != x else x for x in np.asarray(a, dtype=np.float64).tolist()]

        stats = {k: (None if v != v else v) for k, v in self.stats().items()}
        return {
            "schema": "reactccl.simulate/1",
            "algorithm": self.algorithm, "collective": self.collective, "ranks": self.num_ranks,
            "flows_per_epoch": self.num_flows, "topology": self.topology, "hosts": self.num_hosts,
            "message_bytes": self.message_bytes, "placement": self.placement.tolist(),
            "placement_hosts": list(self.placement_hosts), "routes": "fixed" if self.fixed_routes else "ecmp",
            "seed": self.seed, "ecmp_ports": self.ecmp_ports, "order": self.order,
            "header_efficiency": self.header_efficiency, "epochs": self.epochs,
            "background": [list(p) for p in self.background], "bulk": self.bulk, "degraded": self.degraded,
            "stats": stats,
            "durations_s": self.durations.tolist(), "algbw_Bps": nums(self.algbw),
            "busbw_Bps": nums(self.busbw), "slowest": self.slowest,
            "wall_s": self.wall_s, "events": self.events,
        }


def _merge_slowest(best: list[dict], trace: EpochTrace, k: int, topo: Topology) -> list[dict]:
    rows = trace.slowest(k)
    for r in rows:
        r["epoch"] = trace.epoch
        r["src_host"] = topo.hosts[int(trace.meta["src_host"][r["flow"]])]
        r["dst_host"] = topo.hosts[int(trace.meta["dst_host"][r["flow"]])]
    return sorted(best + rows, key=lambda r: (-r["fct"], r["epoch"], r["flow"]))[:k]


def run_simulation(algorithm: str | CollectivePattern, ranks: int | None = None,
                   topology: str | Topology = "fat-tree:k=4", size: float | str = 20e6, epochs: int = 100,
                   background: Sequence[str | Background] = (),
                   degrade: Sequence[str] | Mapping[int, float] | None = None, ports: int = 4, seed: int = 0,
                   placement: str | Sequence[int] = "first", options: Mapping[str, Any] | None = None,
                   slowest: int = 5, keep_traces: bool = False,
                   progress: Callable[[int], None] | None = None,
                   controller: Callable[[CollectivePattern], Controller] | None = None,
                   order: str = "step", header_efficiency: float = 1.0,
                   engine: str | None = None,
                   executor: Callable[..., Any] | None = None) -> SimulationResult:
    """Simulate ``epochs`` epochs of a collective and summarise them.

    Args:
        algorithm: a registered generator name (generated with ``options`` and
            verified; on a topology of servers ``ring`` and ``nccl-tree`` take their server options
            from it where ``options`` do not set them,
            :func:`~reactccl.algorithms.server_options.server_options`) or a ready pattern.
        ranks: number of ranks N (taken from the pattern when one is given).
        topology: a spec such as ``"fat-tree:k=4"`` or a :class:`Topology`.
        size: message size in whole bytes, or text like ``"20MB"`` (decimal) / ``"64MiB"``.
        background: specs as text (``"into:3:p=2"``, see :func:`parse_background`) or objects.
        degrade: degrade specs as text (``"random:k=2:rate=30G"``) or ``{link: bit/s}``.
        ports: ECMP ports per flow; seed: seeds ports, random placement and background.
        placement: ``"first"``, ``"random"``, or host ids/names.
        slowest: how many slowest flows to keep.
        progress: called with the number of finished epochs after each epoch.
        controller: optional factory ``f(pattern) -> ctl`` of a :class:`~reactccl.contract.Controller`
            (e.g. ``reactccl.tuner.ReactController``), made once the pattern is generated: each
            epoch runs ``ctl.pattern_for_epoch(e)`` and the trace is fed back with ``ctl.observe(trace)``
            (:func:`reactccl.contract.drive`). The simulator does not import the tuner. None: the
            pattern at every epoch.
        order: ``"step"`` (default) or ``"data"``: the execution order
            (:mod:`reactccl.pattern.order`).
        header_efficiency: payload bytes per wire byte in (0, 1] (default 1.0); see
            :class:`~reactccl.netsim.network.SimulatedNetwork`.
        engine: ``"compiled"`` or ``"python"`` (the reference engine); ``None``: the default
            (:func:`~reactccl.netsim.network.default_engine`).
        executor: optional factory with :class:`SimulatedCluster`'s arguments returning another
            executor with ``run_epoch`` and a ``network`` exposing ``long_lived`` and ``bulks``
            (e.g. :class:`reactccl.packetsim.PacketCluster`); default the fluid simulator. It gets
            ``start_rule=order``; ``header_efficiency`` and ``engine`` apply to the fluid simulator only.

    Raises:
        PatternError, TopologyError, BackgroundError, UnitError: a bad input, named.
        ValueError: an unknown ``order`` or ``engine``; ``header_efficiency`` outside (0, 1].
    """
    topo = parse_topology(topology) if isinstance(topology, str) else topology
    if isinstance(algorithm, CollectivePattern):
        pattern, name = algorithm, algorithm.name or "pattern"
    else:
        if ranks is None:
            raise ValueError("ranks: required with an algorithm name")
        opts = server_options(algorithm, int(ranks), topo, options, placement, seed)
        pattern = generate(algorithm, int(ranks), size=parse_bytes(size, "size"), **opts)
        name = algorithm
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs: expected an integer >= 1, got {epochs!r}")
    message = parse_bytes(size, "size")
    hosts = place_ranks(topo, pattern.num_ranks, placement, seed=seed)
    specs = [parse_background(b, hosts) if isinstance(b, str) else b for b in background]
    rates = degrade_rates(topo, degrade, seed, hosts=hosts)
    if executor is None:
        cluster = SimulatedCluster(topo, hosts, message, background=specs, degrade=rates, ecmp_ports=ports,
                                   seed=seed, order=order, header_efficiency=header_efficiency, engine=engine)
    else:
        cluster = executor(topo, hosts, message, background=specs, degrade=rates, ecmp_ports=ports, seed=seed,
                           start_rule=order)
    best: list[dict] = []
    traces: list[EpochTrace] = []
    events = 0
    ctl = controller(pattern) if controller is not None else None

    def after(e: int, trs: list[EpochTrace]) -> None:
        nonlocal best, traces, events
        tr = trs[0]
        best = _merge_slowest(best, tr, slowest, topo)
        events += int(tr.meta["events"])
        traces = traces + [tr] if keep_traces else [tr]
        if progress is not None:
            progress(e + 1)

    t0 = time.perf_counter()
    try:
        done = drive(cluster, StaticController(pattern) if ctl is None else ctl, epochs, after)
    finally:
        if hasattr(cluster, "close"):   # an executor with processes (packetsim.ReplicaCluster)
            cluster.close()
    wall = time.perf_counter() - t0
    net = cluster.network
    bulks = net.bulks
    return SimulationResult(
        algorithm=name, collective=pattern.collective.value, num_ranks=pattern.num_ranks,
        num_flows=pattern.num_flows, topology=topo.name, num_hosts=topo.num_hosts, message_bytes=message,
        placement=hosts, seed=seed, ecmp_ports=ports, durations=done.durations[:, 0], algbw=done.algbw[:, 0],
        busbw=done.busbw[:, 0],
        slowest=best, background=[(topo.hosts[s], topo.hosts[d]) for s, d in net.long_lived],
        bulk=[{"src": topo.hosts[b.src], "dst": topo.hosts[b.dst], "bytes": b.nbytes, "period_s": b.period,
               "phase_s": b.phase} for b in bulks],
        degraded={topo.describe_link(link): r for link, r in sorted(rates.items())},
        traces=traces, wall_s=wall, events=events, controller=ctl, pattern_changes=done.changes[0],
        placement_hosts=[topo.hosts[int(h)] for h in hosts], fixed_routes=topo.router is not None,
        order=order, header_efficiency=header_efficiency)

"""Packet-level executors on ns-3: the same jobs, placements, ECMP ports and background as ``netsim``.

:class:`PacketNetwork` builds one ns-3 network from a :class:`~reactccl.topology.Topology`: a node
per host and switch, a point-to-point cable per pair of directed links (each direction's rate from
the graph, so a link degraded in one direction stays so; the cable's latency as its delay), IPv4,
and the queueing and TCP of a named :mod:`transport <.transport>`. Packets are routed by
connection along the paths :meth:`Topology.ecmp_path` picks for netsim (key ``(job, flow, port)``),
ACKs along the reverse cables, so the fluid and the packet engine put every flow on the same links.

Connections (``connections=``):

* ``flow`` (REACT §7.3): each flow of a job gets ``ecmp_ports`` persistent TCP connections, one per
  port, opened the first time the flow's (source host, destination host) is used; each epoch draws
  one port per flow (``default_rng([seed, epoch, job])``, as netsim) and writes on that connection.
  Connections live across epochs, so congestion windows carry over as NCCL's connections do; a
  REACT swap that gives a flow a new host pair opens new connections before that epoch starts.
* ``fresh`` (the reference scenarios): one new connection per flow and epoch.

New connections are opened before the epoch begins: at t = 0 the first epoch waits ``warmup``
(default 1 ms, so background flows are in steady state), later ones until the handshakes are done;
epoch times never include a handshake. An epoch starts at the current simulated time; its flows
start by the executor's start rule (:mod:`.deps`); it ends when the last flow's last byte is
delivered in order to the receiving application. Background traffic (``netsim`` specs) starts with
the first epoch and runs on one connection each for the whole run; bulk sources follow ns-3's clock.

Each cable is built host end first (ns-3 then creates that end's objects, and draws their random
streams, first), which is how the reference scenarios were built: RED marks at random, and DCTCP
times on them move by up to ±10% between ns-3 RNG runs, so the order matters for exact agreement.

One ns-3 simulation exists per process: building a second :class:`PacketNetwork` destroys the
first (ns-3's ``Simulator::Destroy``); a destroyed network raises :class:`PacketSimError`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..pattern import CollectivePattern
from ..topology import Topology
from ..trace import EpochTrace
from ..traffic import (
    Background,
    Bulk,
    Job,
    ResolvedBackground,
    bulk_path,
    check_message_bytes,
    degrade_rates,
    ecmp_ports,
    host_ids,
    parse_background,
    resolve_background,
)
from .deps import START_RULES, child_lists, start_parents
from .native import PacketSimError, load
from .transport import Transport, get_transport

__all__ = ["PacketNetwork", "PacketCluster", "CONNECTION_MODES", "DEFAULT_TIME_LIMIT"]

CONNECTION_MODES = ("flow", "fresh")
#: Simulated seconds an epoch may take before :class:`PacketSimError` (a 20 MB tree takes ~2 ms).
DEFAULT_TIME_LIMIT = 1.0
_current: list["PacketNetwork"] = []


class PacketNetwork(ResolvedBackground):
    """A packet-level network that runs epochs of one or more jobs (the packet twin of
    :class:`reactccl.netsim.SimulatedNetwork`, same arguments and :meth:`run_jobs`).

    Args:
        topology: the network; link rates (bit/s) and latencies (s) come from it.
        transport: a name of :data:`~reactccl.packetsim.transport.TRANSPORTS` (``dctcp``, ``dctcp_red``,
            ``default``) or a :class:`Transport`.
        background, degrade, ecmp_ports, seed, reference_placement: as netsim.
        connections: ``flow`` (persistent, ``ecmp_ports`` per flow) or ``fresh`` (one per flow and epoch).
        start_rule: ``data`` or ``step`` (:mod:`.deps`).
        warmup: simulated seconds before the first epoch (connections and background start at 0).
        time_limit: simulated seconds one epoch may take.
        rng_run: ns-3's RngSeedManager run number.

    Raises:
        PacketSimUnavailable: ns-3 is not installed.
        ValueError: a bad argument (named).
    """

    def __init__(self, topology: Topology, transport: str | Transport = "dctcp",
                 background: Sequence[Background | str] = (),
                 degrade: Mapping[int, float] | str | Sequence[str] | None = None, ecmp_ports: int = 4,
                 seed: int = 0, reference_placement: np.ndarray | None = None, connections: str = "flow",
                 start_rule: str = "data", warmup: float = 1e-3, time_limit: float = DEFAULT_TIME_LIMIT,
                 rng_run: int = 1) -> None:
        if isinstance(ecmp_ports, bool) or not isinstance(ecmp_ports, (int, np.integer)) or ecmp_ports < 1:
            raise ValueError(f"ecmp_ports: expected an integer >= 1, got {ecmp_ports!r}")
        if connections not in CONNECTION_MODES:
            raise ValueError(f"connections: expected one of {', '.join(CONNECTION_MODES)}, got {connections!r}")
        for name, v in (("warmup", warmup), ("time_limit", time_limit)):
            if not (np.isfinite(v) and v >= 0) or (name == "time_limit" and v <= 0):
                raise ValueError(f"{name}: expected a finite number of seconds (> 0 for time_limit), got {v!r}")
        if start_rule not in START_RULES:
            raise ValueError(f"start_rule: expected one of {', '.join(START_RULES)}, got {start_rule!r}")
        self.transport = get_transport(transport)
        self.degrade = degrade_rates(topology, degrade, seed)
        self.topology = topology.degraded(self.degrade) if self.degrade else topology
        self.background_specs = list(background)
        self.ecmp_ports, self.seed, self.connections = int(ecmp_ports), int(seed), connections
        self.start_rule, self.warmup, self.time_limit = start_rule, float(warmup), float(time_limit)
        self.epoch = 0
        self._warm = False      # the first epoch run waits `warmup` (whatever its index: see replicas.py)
        self._reference = None if reference_placement is None else np.asarray(reference_placement, np.int64)
        self._resolved: tuple[list[tuple[int, int]], list[Bulk]] | None = None
        self._conns: dict[tuple, int] = {}
        self._conn_info: list[tuple[int, int, tuple[int, ...]]] = []  # (src host, dst host, path)
        self.last_stats: dict[str, float] = {}
        self._alive = True
        self._build(int(rng_run))

    # ------------------------------------------------------------------ building
    def _build(self, rng_run: int) -> None:
        ns, native = load()
        for old in _current:
            old._alive = False
        if _current:
            ns.Simulator.Destroy()
            _current.clear()
        ns.Config.Reset()
        ns.RngSeedManager.SetSeed(1)
        ns.RngSeedManager.SetRun(rng_run)
        ns.RngSeedManager.ResetNextStreamIndex()
        self.transport.apply(ns)
        self._ns = ns
        net = native.Net()
        topo = self.topology
        for _ in topo.nodes:  # ns-3 node i = topology node i (host ids map through _host_node)
            net.AddNode()
        net.SetQueueing(self.transport.qdisc, self.transport.device_queue)
        host_set = set(topo.hosts)
        for a, b in topo.cables().tolist():
            if b < 0:
                raise ValueError(f"{topo.name}: link {a} ({topo.describe_link(a)}) has no reverse link; "
                                 "the packet engine needs both directions of a cable (ACKs)")
            if topo.latency[a] != topo.latency[b]:
                raise ValueError(f"{topo.name}: cable {topo.describe_link(a)} has different latencies per "
                                 "direction; a point-to-point channel has one delay")
            if topo.nodes[topo.link_dst[a]] in host_set and topo.nodes[topo.link_src[a]] not in host_set:
                a, b = b, a  # the host's end first: ns-3 then creates its objects (and RNG streams) first
            net.AddCable(int(topo.link_src[a]), int(topo.link_dst[a]), a, b, float(topo.capacity[a]),
                         float(topo.capacity[b]), float(topo.latency[a]))
        net.Build()
        self._net = net
        self._host_node = np.array([topo.nodes.index(h) for h in topo.hosts], dtype=np.int64)
        _current.append(self)

    def _check_alive(self) -> None:
        if not self._alive:
            raise PacketSimError("this PacketNetwork was destroyed: a newer one was built in this process "
                                 "(ns-3 runs one simulation per process)")

    def _open(self, key: tuple, src: int, dst: int, path: np.ndarray) -> int:
        cid = self._conns.get(key)
        if cid is None:
            links = [int(l) for l in path]
            cid = int(self._net.Open(int(self._host_node[src]), int(self._host_node[dst]), links))
            self._conns[key] = cid
            self._conn_info.append((src, dst, tuple(links)))
        return cid

    def _background(self, placement: np.ndarray) -> None:
        if self._resolved is not None:
            return
        ref = self._reference if self._reference is not None else placement
        specs = [parse_background(b, ref) if isinstance(b, str) else b for b in self.background_specs]
        self._resolved = resolve_background(specs, self.topology, ref, self.seed)
        long_lived, bulks = self._resolved
        now = self._ns.Simulator.Now().GetSeconds()
        for i, (s, d) in enumerate(long_lived):
            cid = self._open(("bg", i), s, d, self.topology.ecmp_path(s, d, (-1, i, 0)))
            self._net.SetInfinite(cid)
        for i, b in enumerate(bulks):
            cid = self._open(("bulk", i), b.src, b.dst, bulk_path(self.topology, b, i))
            self._net.AddBulk(cid, float(b.nbytes), max(b.phase - now, 0.0), float(b.period))

    # -------------------------------------------------------------------- epochs
    def _settle(self) -> None:
        """Open what is pending: the first epoch waits ``warmup``, later ones the handshakes."""
        net = self._net
        if not self._warm and self.warmup > 0:
            net.RunFor(self.warmup)
        self._warm = True
        if net.Unconnected() > 0 and not net.WaitConnected(self.time_limit):
            raise PacketSimError(f"{net.Unconnected()} TCP connections did not open within "
                                 f"{self.time_limit:g} s of simulated time ({net.Failed()} refused)")

    def run_flows(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, parent_ptr: np.ndarray,
                  parent: np.ndarray, keys: Sequence[tuple], paths: Sequence[np.ndarray],
                  labels: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """One epoch of arbitrary flows: flow ``f`` sends ``nbytes[f]`` from host ``src[f]`` to
        ``dst[f]`` on the connection called ``keys[f]`` (opened along ``paths[f]`` if new) once its
        parents (CSR ``parent_ptr``/``parent``) are delivered.

        Returns:
            ``(start, end, stats)``: per-flow seconds from the epoch start, shape ``(F,)``, and
            wall time, packets and events of the run.

        Raises:
            PacketSimError: a flow not delivered within ``time_limit``; packets without a route.
        """
        self._check_alive()
        F = len(src)
        net = self._net
        conn = [self._open(keys[f], int(src[f]), int(dst[f]), paths[f]) for f in range(F)]
        self._settle()
        waiting, child_ptr, child = child_lists(np.asarray(parent_ptr), np.asarray(parent, dtype=np.int64), F)
        ev0, pk0, t0 = self._ns.Simulator.GetEventCount(), int(net.packets), time.perf_counter()
        ok = net.RunEpoch(conn, [float(b) for b in nbytes], waiting.tolist(), child_ptr.tolist(), child.tolist(),
                          self.time_limit)
        wall = time.perf_counter() - t0
        start, end = np.array(list(net.start)), np.array(list(net.end))
        stats = {"wall_s": wall, "packets": int(net.packets) - pk0,
                 "events": int(self._ns.Simulator.GetEventCount()) - ev0, "connections": len(self._conns)}
        if net.Unrouted():
            raise PacketSimError(f"{int(net.Unrouted())} packets found no route (a connection without a path)")
        if not ok:
            left = np.flatnonzero(end < 0)
            names = labels if labels is not None else [f"flow {f}" for f in range(F)]
            shown = ", ".join(f"{names[f]} ({'started' if start[f] >= 0 else 'never started'}, "
                              f"{int(net.Delivered(conn[f]))} of {int(net.Queued(conn[f]))} bytes on its "
                              f"connection delivered)" for f in left[:5])
            raise PacketSimError(f"{len(left)} of {F} flows not delivered within {self.time_limit:g} s of "
                                 f"simulated time: {shown}")
        return start, end, stats

    def _conn_key(self, job: int, flow: int, src: int, dst: int, port: int) -> tuple:
        if self.connections == "fresh":
            return ("fresh", self.epoch, job, flow)
        return ("flow", src, dst, job, flow, port)

    def run_jobs(self, jobs: Sequence[Job | tuple]) -> list[EpochTrace]:
        """Run one epoch of all ``jobs`` starting together; one trace per job (as netsim's).

        Raises:
            ValueError: a placement of the wrong length or with repeated hosts.
            PacketSimError: a flow not delivered in time.
        """
        self._check_alive()
        jobs = [j if isinstance(j, Job) else Job(*j) for j in jobs]
        if not jobs:
            raise ValueError("run_jobs: no jobs")
        jobs = [Job(j.pattern, host_ids(self.topology, j.placement),
                    check_message_bytes(j.message_bytes, f"job {k}: message_bytes"))
                for k, j in enumerate(jobs)]
        for k, j in enumerate(jobs):
            if len(j.placement) != j.pattern.num_ranks:
                raise ValueError(f"job {k}: placement has {len(j.placement)} hosts for {j.pattern.num_ranks} ranks")
            if len(np.unique(j.placement)) != len(j.placement):
                raise ValueError(f"job {k}: placement repeats a host")
        self._background(jobs[0].placement)
        topo = self.topology
        srcs, dsts, sizes, keys, paths, labels, ptrs, parents, per_job = [], [], [], [], [], [], [], [], []
        offset = 0
        for k, job in enumerate(jobs):
            p, place = job.pattern, job.placement
            F = p.num_flows
            ports = ecmp_ports((self.seed, self.epoch, k), self.ecmp_ports, F)
            sh, dh = place[p.src], place[p.dst]
            for f in range(F):
                s, d = int(sh[f]), int(dh[f])
                if self.connections == "flow":  # a flow's ports open together (REACT §7.3)
                    for q in range(self.ecmp_ports):
                        key = self._conn_key(k, f, s, d, q)
                        if key not in self._conns:
                            self._open(key, s, d, topo.ecmp_path(s, d, (k, f, q)))
                keys.append(self._conn_key(k, f, s, d, int(ports[f])))
                paths.append(topo.ecmp_path(s, d, (k, f, int(ports[f]))))
                labels.append(f"job {k} flow {f} (step {int(p.step[f])}, rank {int(p.src[f])}->{int(p.dst[f])})")
            srcs.append(sh)
            dsts.append(dh)
            nbytes = p.flow_bytes(job.message_bytes)
            sizes.append(nbytes)
            ptr, par = start_parents(p, self.start_rule)
            ptrs.append(ptr[1:] + (ptrs[-1][-1] if ptrs else 0))
            parents.append(par + offset)
            per_job.append((offset, F, ports, nbytes))
            offset += F
        parent_ptr = np.concatenate([[0], *ptrs]).astype(np.int64)
        start, end, stats = self.run_flows(np.concatenate(srcs), np.concatenate(dsts), np.concatenate(sizes),
                                           parent_ptr, np.concatenate(parents), keys, paths, labels)
        traces = []
        for k, (job, (off, F, ports, nbytes)) in enumerate(zip(jobs, per_job)):
            s, e = start[off:off + F], end[off:off + F]
            traces.append(EpochTrace(
                epoch=self.epoch, pattern=job.pattern, message_bytes=job.message_bytes, start=s, end=e,
                flow_bytes=nbytes, duration=float(e.max()) if F else 0.0, paths=[np.asarray(x) for x in paths[off:off + F]],
                meta={"epoch": self.epoch, "seed": self.seed, "job": k, "ports": ports, "ecmp_ports": self.ecmp_ports,
                      "placement": job.placement, "src_host": job.placement[job.pattern.src],
                      "dst_host": job.placement[job.pattern.dst], "topology": topo.name, "engine": "packet",
                      "transport": self.transport.name, **stats}))
        self.last_stats = stats
        self.epoch += 1
        return traces


class PacketCluster:
    """The single-job executor REACT drives on the packet engine: ``run_epoch(pattern) -> EpochTrace``
    (the twin of :class:`reactccl.netsim.SimulatedCluster`; extra keyword arguments go to
    :class:`PacketNetwork`, e.g. ``transport="default"``)."""

    def __init__(self, topology: Topology, placement: Sequence[int] | np.ndarray, message_bytes: float,
                 background: Sequence[Background | str] = (),
                 degrade: Mapping[int, float] | str | Sequence[str] | None = None,
                 ecmp_ports: int = 4, seed: int = 0, **options: Any) -> None:
        self.placement = host_ids(topology, placement)
        self.message_bytes = check_message_bytes(message_bytes, "message_bytes")
        self.network = PacketNetwork(topology, background=background, degrade=degrade, ecmp_ports=ecmp_ports,
                                     seed=seed, reference_placement=self.placement, **options)

    @property
    def topology(self) -> Topology:
        """The (possibly degraded) topology the epochs run on."""
        return self.network.topology

    def run_epoch(self, pattern: CollectivePattern) -> EpochTrace:
        """Run one epoch of ``pattern`` (positions = ranks already mapped); returns its trace."""
        return self.network.run_jobs([Job(pattern, self.placement, self.message_bytes)])[0]

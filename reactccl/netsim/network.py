"""Executors on a simulated network: several jobs per epoch, or one job (the REACT protocol).

Per epoch and job, every flow of the pattern draws one of its ``ecmp_ports``
ports at random (REACT §7.3: "each flow ... is initialized with 4 connections
on 4 different ports ... at each epoch, one port is chosen at random") and
takes ``topology.ecmp_path(src_host, dst_host, (job, flow, port))`` (a topology with a
fixed router, e.g. a torus fabric, gives its one route whatever the port). A flow
starts once all flows it depends on (``pattern.dependencies()``) have arrived and, in
step order (``order="step"``, the default; :mod:`reactccl.pattern.order`), once its
rank's sends of the previous sending step in the same chunk graph have left it; the
engine tracks both through joins (:mod:`.joins`) rather than full lists.
``order="data"`` drops the second condition (every send starts as soon as its data is
in). Flows with no condition start at the epoch start. Background traffic is
resolved once (seeded) and re-injected every epoch; bulk bursts follow a global
clock that advances by each epoch's duration.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np

from ..pattern import CollectivePattern
from ..pattern.order import check_order
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
from .compiled import CompiledEngine
from .jobdata import JobData
from .joins import join_graph
from .plan import EpochPlan, PathList
from .reference import MAX_BACKLOG, FluidEngine

__all__ = ["SimulatedNetwork", "SimulatedCluster", "Job", "degrade_rates", "ENGINES", "check_header_efficiency",
           "default_engine"]

ENGINES = {"compiled": CompiledEngine, "python": FluidEngine}
"""Engines by name: ``"compiled"`` (numba, the default) and ``"python"`` (the reference)."""


def default_engine() -> str:
    """The engine used when none is named: ``$REACTCCL_NETSIM_ENGINE`` if set (``compiled`` or
    ``python``; lets a benchmark run whole experiments on the reference), else ``"compiled"``."""
    return os.environ.get("REACTCCL_NETSIM_ENGINE", "compiled")


def check_header_efficiency(value) -> float:
    """``value`` as a float in (0, 1]: payload bytes per byte on the wire. ValueError otherwise."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"header_efficiency: expected a number in (0, 1], got {value!r}") from None
    if not 0.0 < v <= 1.0:
        raise ValueError(f"header_efficiency: payload bytes per wire byte must be in (0, 1] (e.g. 1448/1538 "
                         f"= 0.9415 for TCP over 1500-byte-MTU Ethernet), got {value!r}")
    return v


def _job_flows(topology: Topology, job: Job, job_id: int, ports: np.ndarray, offset: int, join_offset: int,
               order: str = "step"):
    """Paths, bytes, latencies and start conditions of one job's flows (flow ids offset by
    ``offset``, join ids by ``join_offset``; see :mod:`.joins`)."""
    p = job.pattern
    place = job.placement
    F = p.num_flows
    keys = np.column_stack([np.full(F, job_id), np.arange(F), ports])
    ptr, links = topology.ecmp_paths(place[p.src], place[p.dst], keys)
    lat = np.add.reduceat(topology.latency[links], ptr[:-1]) if F else np.zeros(0)
    jg = join_graph(p, order)

    def shifted(ref: np.ndarray) -> list[int]:  # flows >= 0 move by offset, joins ~j by join_offset
        return np.where(ref >= 0, ref + offset, ref - join_offset).tolist()

    children = _split(shifted(jg.flow_child), jg.flow_child_ptr)
    join_children = _split(shifted(jg.join_child), jg.join_child_ptr)
    sent_children = _split(shifted(jg.flow_sent), jg.flow_sent_ptr)
    paths = _split(links.tolist(), ptr, tuple)
    return (paths, ptr, links, p.flow_bytes(job.message_bytes), lat, jg.flow_waiting, children,
            jg.join_waiting, join_children, sent_children)


def _split(flat: list, ptr: np.ndarray, kind: type = list) -> list:
    """``flat`` cut at CSR ``ptr`` into ``len(ptr) - 1`` pieces (lists, or tuples with ``kind=tuple``)."""
    pp = ptr.tolist()
    if kind is tuple:
        return [tuple(flat[a:b]) for a, b in zip(pp[:-1], pp[1:])]
    return [flat[a:b] for a, b in zip(pp[:-1], pp[1:])]


class SimulatedNetwork(ResolvedBackground):
    """A network that runs epochs of one or more jobs together, with background traffic.

    Args:
        topology: the network (already degraded, or pass ``degrade``).
        background: spec objects or text (see :mod:`reactccl.traffic.background`, e.g. ``"into:3:p=2"``), or one of them;
            rank-relative ones are resolved against ``reference_placement`` (default: the
            first job's placement at the first epoch).
        degrade: ``{link_id: bit/s}`` capacities to lower, or degrade specs as text
            (``"random:k=2:rate=30G"`` and ``"cable=5:rate=30G"`` both directions,
            ``"link=12:rate=30G"`` one direction; one string or a list).
        ecmp_ports: ports per flow K (REACT §7.3 uses 4); 1 = fixed paths.
        seed: seeds port draws (``default_rng([seed, epoch, job])``) and background choices.
        max_backlog: most bursts of one bulk source that may be sending at once (see
            :class:`~reactccl.netsim.reference.FluidEngine`); more raises SimulationError.
        max_events: events allowed per epoch (``None``: the engine's generous default).
        order: ``"step"`` (default) or ``"data"``, the execution order of
            :mod:`reactccl.pattern.order`.
        header_efficiency: payload bytes per byte on the wire, in (0, 1] (default 1.0: no
            headers). A flow of B payload bytes puts ``B / header_efficiency`` bytes on its links;
            traces keep payload bytes, so algbw/busbw are payload rates. TCP/IPv4 with timestamps
            over 1500-byte-MTU Ethernet carries 1448 payload bytes per packet: 1448/1500 counts IP
            and TCP headers only, 1448/1538 also the Ethernet header, FCS, preamble and gap.
            Background and bulk flows are given in wire bytes and are not scaled.
        engine: ``"compiled"`` or ``"python"`` (the reference, :data:`ENGINES`); ``None``:
            :func:`default_engine`.

    Raises:
        ValueError: ecmp_ports < 1, an unknown order; errors of :func:`resolve_background` and ``degraded``.
    """

    def __init__(self, topology: Topology, background: Sequence[Background | str] = (),
                 degrade: Mapping[int, float] | str | Sequence[str] | None = None, ecmp_ports: int = 4,
                 seed: int = 0, reference_placement: np.ndarray | None = None,
                 max_backlog: int = MAX_BACKLOG, max_events: int | None = None, order: str = "step",
                 header_efficiency: float = 1.0, engine: str | None = None) -> None:
        self.order = check_order(order)
        engine = default_engine() if engine is None else engine
        self.header_efficiency = check_header_efficiency(header_efficiency)
        if engine not in ENGINES:
            raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
        self.engine = engine
        if isinstance(ecmp_ports, bool) or not isinstance(ecmp_ports, (int, np.integer)) or ecmp_ports < 1:
            raise ValueError(f"ecmp_ports: expected an integer >= 1, got {ecmp_ports!r}")
        self.degrade = degrade_rates(topology, degrade, seed)
        self.topology = topology.degraded(self.degrade) if self.degrade else topology
        # one spec given as text is one spec (list("into:3:p=2") would be its characters)
        self.background_specs = [background] if isinstance(background, (str, Background)) else list(background)
        self.ecmp_ports = int(ecmp_ports)
        self.seed = int(seed)
        self.epoch = 0
        self.clock = 0.0  # global time at the start of the next epoch (s)
        self._reference = None if reference_placement is None else np.asarray(reference_placement, np.int64)
        self._resolved: tuple[list[tuple[int, int]], list[Bulk]] | None = None
        self._bulk_next: list[float] = []
        self._carry: list[tuple[int, float]] = []  # (bulk source, bytes left) still sending
        self._paths_cache: tuple | None = None
        self._jobs: dict[tuple, JobData] = {}
        self._plans: dict[tuple, EpochPlan] = {}
        self._distinct: set[bytes] = set()  # placements checked to repeat no host
        self.last_stats: dict[str, float] = {}
        self.max_backlog, self.max_events = max_backlog, max_events
        FluidEngine(np.ones(1), max_events, max_backlog)  # checks both limits now

    def _job_data(self, topology: Topology, job: Job, job_id: int) -> JobData:
        """The cached :class:`~reactccl.netsim.jobdata.JobData` of ``job`` (by pattern identity,
        placement, size and job index; the last 8 kept)."""
        key = (id(job.pattern), job_id, job.placement.tobytes(), job.message_bytes)
        jd = self._jobs.get(key)
        if jd is None or jd.pattern is not job.pattern:
            jd = JobData(topology, job.pattern, job.placement, job_id, job.message_bytes, self.ecmp_ports, self.order)
            self._jobs[key] = jd
            while len(self._jobs) > 8:
                self._jobs.pop(next(iter(self._jobs)))
        return jd

    def _checked(self, placement) -> np.ndarray:
        """``placement`` as host ids; an int64 array seen before (and so checked) as it is."""
        if (type(placement) is np.ndarray and placement.dtype == np.int64 and placement.ndim == 1
                and placement.tobytes() in self._distinct):
            return placement
        return host_ids(self.topology, placement)

    def _plan(self, topology: Topology, jobs: Sequence[Job], scale: float) -> EpochPlan:
        """The cached :class:`~reactccl.netsim.plan.EpochPlan` of ``jobs`` with this network's
        long-lived background (by the identity of the jobs' data, the resolved background and the
        header scale; the last 4 kept)."""
        jds = [self._job_data(topology, job, k) for k, job in enumerate(jobs)]
        key = (tuple(map(id, jds)), id(self._resolved), scale)
        plan = self._plans.get(key)
        if plan is None or plan.jobs != jds:              # JobData compares by identity
            paths = self.background_paths()
            ptr = np.zeros(len(paths) + 1, dtype=np.int64)
            np.cumsum([len(x) for x in paths], out=ptr[1:])
            links = np.concatenate(paths) if paths else np.zeros(0, np.int64)
            lat = np.add.reduceat(topology.latency[links], ptr[:-1]) if paths else np.zeros(0)
            plan = self._plans[key] = EpochPlan(jds, (ptr, links, lat), scale)
            while len(self._plans) > 4:
                self._plans.pop(next(iter(self._plans)))
        return plan

    def _add_reference(self, eng: FluidEngine, topology: Topology, job: Job, k: int, ports: np.ndarray,
                       scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Add job ``k``'s flows and joins to the reference engine; returns its bytes per flow and
        its paths (links, CSR ptr)."""
        paths, ptr, links, nbytes, lat, waiting, children, jwait, jkids, sent = _job_flows(
            topology, job, k, ports, eng.num_flows, eng.num_joins, self.order)
        eng.add_joins(jwait, jkids)
        eng.add_flows(paths, nbytes * scale, lat, waiting, children, [0.0] * len(paths), watched=True,
                      sent_children=sent)
        return nbytes, links, ptr

    def _background(self, placement: np.ndarray):
        if self._resolved is None:
            ref = self._reference if self._reference is not None else placement
            specs = [parse_background(b, ref) if isinstance(b, str) else b for b in self.background_specs]
            self._resolved = resolve_background(specs, self.topology, ref, self.seed)
            self._bulk_next = [b.phase for b in self._resolved[1]]
        return self._resolved

    def background_paths(self) -> list[np.ndarray]:
        """Link ids of each resolved long-lived flow: ECMP with key ``(-1, i, 0)``, one path for the
        whole run (an external connection does not change ports)."""
        if self._paths_cache is None or self._paths_cache[0] is not self._resolved:
            ll = [self.topology.ecmp_path(s, d, (-1, i, 0)) for i, (s, d) in enumerate(self.long_lived)]
            bk = [bulk_path(self.topology, b, i) for i, b in enumerate(self.bulks)]
            self._paths_cache = (self._resolved, ll, bk)
        return list(self._paths_cache[1])

    def bulk_paths(self) -> list[np.ndarray]:
        """Link ids of each resolved bulk source (:func:`~reactccl.traffic.background.bulk_path`)."""
        self.background_paths()
        return list(self._paths_cache[2])

    def run_jobs(self, jobs: Sequence[Job | tuple]) -> list[EpochTrace]:
        """Run one epoch of all ``jobs`` starting together; returns one trace per job.

        Each trace's ``duration`` is that job's own completion (its last flow's
        arrival); the network's clock advances by the longest.

        Raises:
            ValueError: a placement of the wrong length or with repeated hosts.
            SimulationError: a job that cannot finish.
        """
        jobs = [j if isinstance(j, Job) else Job(*j) for j in jobs]
        jobs = [Job(j.pattern, self._checked(j.placement),
                    check_message_bytes(j.message_bytes, f"job {k}: message_bytes"))
                for k, j in enumerate(jobs)]
        if not jobs:
            raise ValueError("run_jobs: no jobs")
        for k, j in enumerate(jobs):
            if len(j.placement) != j.pattern.num_ranks:
                raise ValueError(f"job {k}: placement has {len(j.placement)} hosts for "
                                 f"{j.pattern.num_ranks} ranks")
            key = j.placement.tobytes()
            if key not in self._distinct:
                if len(np.unique(j.placement)) != len(j.placement):
                    raise ValueError(f"job {k}: placement repeats a host")
                self._distinct.add(key)
        topo = self.topology
        long_lived, bulks = self._background(jobs[0].placement)
        eng = ENGINES[self.engine](topo.capacity, self.max_events, self.max_backlog)
        scale = 1.0 / self.header_efficiency
        ports = [ecmp_ports((self.seed, self.epoch, k), self.ecmp_ports, j.pattern.num_flows)
                 for k, j in enumerate(jobs)]
        if isinstance(eng, CompiledEngine):
            plan = self._plan(topo, jobs, scale)
            eng.use_table(plan.table, plan.rows(ports))
            nbytes = [jd.nbytes for jd in plan.jobs]
        else:
            added = [self._add_reference(eng, topo, job, k, ports[k], scale) for k, job in enumerate(jobs)]
            nbytes = [a[0] for a in added]
            if long_lived:
                paths = [x.tolist() for x in self.background_paths()]
                k = len(paths)
                eng.add_flows(paths, [np.inf] * k, [topo.path_latency(x) for x in paths], [0] * k, [()] * k,
                              [0.0] * k, watched=False)
        bulk_paths = self.bulk_paths()
        for i, b in enumerate(bulks):
            path = bulk_paths[i]
            eng.add_periodic(path.tolist(), b.nbytes, topo.path_latency(path), self._bulk_next[i] - self.clock,
                             b.period)
        for src_idx, left in self._carry:
            path = bulk_paths[src_idx]
            eng.add_burst(src_idx, path.tolist(), left, topo.path_latency(path))
        eng.run()
        traces = []
        offset = 0
        for k, job in enumerate(jobs):
            F = job.pattern.num_flows
            if isinstance(eng, CompiledEngine):
                ptr = np.zeros(F + 1, dtype=np.int64)
                if F:
                    ptr[:F] = eng.path_start[offset:offset + F]
                    ptr[F] = ptr[F - 1] + eng.path_len[offset + F - 1]
                paths = PathList(eng.path_links, ptr)
            else:
                paths = PathList(added[k][1], added[k][2])
            end = np.array(eng.end[offset:offset + F])
            traces.append(EpochTrace(
                epoch=self.epoch, pattern=job.pattern, message_bytes=job.message_bytes,
                start=np.array(eng.start[offset:offset + F]), end=end, flow_bytes=nbytes[k],
                duration=float(end.max()) if F else 0.0, paths=paths,
                meta={"epoch": self.epoch, "seed": self.seed, "job": k, "ports": ports[k],
                      "ecmp_ports": self.ecmp_ports, "placement": job.placement,
                      "src_host": job.placement[job.pattern.src], "dst_host": job.placement[job.pattern.dst],
                      "topology": topo.name, "events": eng.events, "batches": eng.batches}))
            offset += F
        if bulks:
            self._save_bursts(eng)
        self.last_stats = {"events": eng.events, "batches": eng.batches, "flows": eng.num_flows}
        self.clock += eng.time
        self.epoch += 1
        return traces

    def _save_bursts(self, eng: FluidEngine) -> None:
        """Remember bulk bursts still sending and each source's next burst time (global clock)."""
        source_of = eng.origin
        self._carry = [(source_of[i], left) for i, left in eng.unfinished() if i in source_of]
        self._bulk_next = [self.clock + t for t in eng.next_periodic]


class SimulatedCluster:
    """The single-job executor REACT drives: ``run_epoch(pattern) -> EpochTrace``.

    Args:
        topology: the network.
        placement: host (id or name) of each rank, shape ``(N,)`` (see :func:`reactccl.topology.placement`).
        message_bytes: the collective's message size S in bytes (finite, > 0).
        background, degrade, ecmp_ports, seed, order, header_efficiency, engine: as :class:`SimulatedNetwork`.

    Raises:
        ValueError: ``message_bytes`` not a finite number > 0; errors of :class:`SimulatedNetwork`.
    """

    def __init__(self, topology: Topology, placement: Sequence[int] | np.ndarray, message_bytes: float,
                 background: Sequence[Background | str] = (),
                 degrade: Mapping[int, float] | str | Sequence[str] | None = None,
                 ecmp_ports: int = 4, seed: int = 0, order: str = "step", header_efficiency: float = 1.0,
                 engine: str | None = None) -> None:
        self.placement = host_ids(topology, placement)
        self.message_bytes = check_message_bytes(message_bytes, "message_bytes")
        self.network = SimulatedNetwork(topology, background, degrade, ecmp_ports, seed,
                                        reference_placement=self.placement, order=order,
                                        header_efficiency=header_efficiency, engine=engine)

    @property
    def topology(self) -> Topology:
        """The (possibly degraded) topology the epochs run on."""
        return self.network.topology

    def run_epoch(self, pattern: CollectivePattern) -> EpochTrace:
        """Run one epoch of ``pattern`` (positions = ranks already mapped); returns its trace."""
        return self.network.run_jobs([Job(pattern, self.placement, self.message_bytes)])[0]

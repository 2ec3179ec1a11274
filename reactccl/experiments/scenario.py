"""Experiment scenarios: which jobs run where, with what background traffic and failed links.

A :class:`Scenario` is plain, picklable data with every random choice already made
(placements, the concrete external flows, the degraded links), so the same scenario
runs the baseline and REACT "arms" on identical conditions and can be shipped to a
worker process. The generators here draw those choices from a seed: the same seed
gives the same scenario.

Paper settings (REACT §7.3): 100 Gbps links, 1 µs per link, 8 ranks, 20 MB
messages, 100 epochs, 4 ECMP ports per flow drawn per epoch, measure after epoch 25.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from ..algorithms import generate
from ..algorithms.server_options import server_options
from ..pattern import CollectivePattern
from ..topology import Topology, parse_topology
from ..traffic import LongLived, RandomPairs, job_cables, resolve_background

__all__ = ["JobSpec", "job_pattern", "Scenario", "PAPER", "PAPER_OPTIONS", "scenario_seed", "topology",
           "random_pairs_scenario", "degraded_scenario", "shared_nodes_scenario", "network_sharing_scenario",
           "ARMS_SINGLE"]

#: REACT §7.3 defaults.
PAPER: dict[str, Any] = {"ranks": 8, "message_bytes": 20e6, "epochs": 100, "warmup": 25, "ecmp_ports": 4,
                         "rate": 100e9, "latency": 1e-6}

#: Generator options of the paper's runs, given by name so a generator's default cannot change them: REACT
#: runs NCCL's tree unpipelined, one slice per tree (``nccl-tree``'s default slices by NCCL's chunk rule
#: where the message size is known).
PAPER_OPTIONS: dict[str, dict[str, Any]] = {"nccl-tree": {"slices": 1}}

#: Arms of a single-job scenario: name -> which jobs run REACT.
ARMS_SINGLE: tuple[tuple[str, tuple[bool, ...]], ...] = (("baseline", (False,)), ("react", (True,)))


@dataclass(frozen=True)
class JobSpec:
    """One collective job: a registered generator (``reactccl.algorithms``), its rank count,
    message size S (bytes), the host id of each rank (shape ``(ranks,)``) and generator options
    beyond :data:`PAPER_OPTIONS` (``(("hierarchy", "flat"),)``; default none)."""

    algorithm: str
    ranks: int
    message_bytes: float
    placement: tuple[int, ...]
    options: tuple[tuple[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``options`` only when some are given)."""
        out = {"algorithm": self.algorithm, "ranks": self.ranks, "message_bytes": self.message_bytes,
               "placement": list(self.placement)}
        return {**out, "options": dict(self.options)} if self.options else out


def job_pattern(job: JobSpec, topology_spec: str) -> CollectivePattern:
    """The verified pattern ``job`` runs on topology ``topology_spec``: its generator with
    :data:`PAPER_OPTIONS` and the job's options; on a topology of servers ``ring`` and ``nccl-tree``
    are NCCL's hierarchical patterns over the job's servers
    (:func:`reactccl.algorithms.server_options.server_options`, checked against the job's placement).

    Raises:
        PatternError: options the generator refuses; ranks that do not fill whole servers or sit
            off the pattern's positions (named).
    """
    opts = {**PAPER_OPTIONS.get(job.algorithm, {}), **dict(job.options)}
    opts = server_options(job.algorithm, job.ranks, topology(topology_spec), opts, list(job.placement))
    return generate(job.algorithm, job.ranks, **opts)


@dataclass(frozen=True)
class Scenario:
    """Everything one run needs, with all random choices made.

    Attributes:
        experiment: the experiment's name (e.g. ``"fig5a"``).
        setting: the sweep point, e.g. ``(("x", 2), ("p", 4))``; scenarios with
            equal settings are aggregated together.
        index: the scenario's number within its setting.
        seed: seeds the ECMP port draws and REACT's randomness.
        topology: a topology spec (:func:`reactccl.topology.parse_topology`).
        jobs: the jobs, all started together each epoch.
        flows: external long-lived flows as ``(src_host, dst_host)``, one entry per flow.
        degrade: ``((link_id, bit/s), ...)`` links running below their capacity.
        ecmp_ports: ports per flow, one drawn at random per epoch (1 = fixed paths).
        epochs, warmup: epochs to run; epochs ``< warmup`` are left out of the metrics.
        arms: ``(name, react_per_job)`` runs to compare; the first arm is the baseline.
    """

    experiment: str
    setting: tuple[tuple[str, Any], ...]
    index: int
    seed: int
    topology: str
    jobs: tuple[JobSpec, ...]
    flows: tuple[tuple[int, int], ...] = ()
    degrade: tuple[tuple[int, float], ...] = ()
    ecmp_ports: int = PAPER["ecmp_ports"]
    epochs: int = PAPER["epochs"]
    warmup: int = PAPER["warmup"]
    arms: tuple[tuple[str, tuple[bool, ...]], ...] = ARMS_SINGLE
    extra: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.jobs:
            raise ValueError(f"{self.experiment}: a scenario needs at least one job")
        if not 0 <= self.warmup < self.epochs:
            raise ValueError(f"{self.experiment}: warmup must be in 0..epochs-1 "
                             f"(epochs={self.epochs}, warmup={self.warmup})")
        for name, react in self.arms:
            if len(react) != len(self.jobs):
                raise ValueError(f"{self.experiment}: arm {name!r} names {len(react)} jobs, "
                                 f"the scenario has {len(self.jobs)}")
        if not self.arms or any(self.arms[0][1]):
            raise ValueError(f"{self.experiment}: the first arm must be the baseline (no REACT)")

    @property
    def setting_dict(self) -> dict[str, Any]:
        """The sweep point as a dict."""
        return dict(self.setting)

    def background(self) -> list[LongLived]:
        """The external flows as :class:`reactccl.netsim.LongLived` specs."""
        return [LongLived(int(s), int(d)) for s, d in self.flows]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description (no results)."""
        return {"setting": self.setting_dict, "index": self.index, "seed": self.seed, "topology": self.topology,
                "jobs": [j.to_json() for j in self.jobs], "external_flows": [list(f) for f in self.flows],
                "degrade": [[int(l), float(r)] for l, r in self.degrade], "ecmp_ports": self.ecmp_ports,
                "epochs": self.epochs, "warmup": self.warmup, **dict(self.extra)}


def scenario_seed(base: int, *keys: int) -> int:
    """A 31-bit seed derived from ``base`` and integer ``keys`` (numpy ``SeedSequence``)."""
    return int(np.random.SeedSequence([int(base), *(int(k) for k in keys)]).generate_state(1)[0] >> 1)


@lru_cache(maxsize=16)
def topology(spec: str) -> Topology:
    """The topology for ``spec``, built once per process (paths are cached on it)."""
    return parse_topology(spec)


def _random_hosts(rng: np.random.Generator, hosts: np.ndarray, n: int, what: str) -> tuple[int, ...]:
    if n > len(hosts):
        raise ValueError(f"{what}: {n} ranks need {n} hosts, only {len(hosts)} available")
    return tuple(int(h) for h in rng.choice(hosts, size=n, replace=False))


def _job_hosts(rng: np.random.Generator, topo: Topology, n: int, what: str) -> tuple[int, ...]:
    """``n`` random hosts of ``topo`` for a job's ranks; on a topology of servers ceil(n / G) whole
    servers in random order, local order kept (as :func:`reactccl.topology.placement`'s ``random``),
    so NCCL's hierarchy fits them (:func:`job_pattern`)."""
    lay = topo.servers
    if lay is None:
        return _random_hosts(rng, np.arange(topo.num_hosts), n, what)
    if n > lay.num_gpus:
        raise ValueError(f"{what}: {n} ranks need {n} GPUs, only {lay.num_gpus} ({lay.S} servers x {lay.G})")
    servers = rng.choice(lay.S, size=-(-n // lay.G), replace=False)
    return tuple(int(h) for h in lay.gpu_host[servers].reshape(-1)[:n])


def random_pairs_scenario(experiment: str, setting: Sequence[tuple[str, Any]], index: int, base_seed: int,
                          topology_spec: str, algorithm: str, x: int, p: int, *,
                          ranks: int = PAPER["ranks"], message_bytes: float = PAPER["message_bytes"],
                          epochs: int = PAPER["epochs"], warmup: int = PAPER["warmup"],
                          ecmp_ports: int = PAPER["ecmp_ports"], setting_index: int = 0) -> Scenario:
    """REACT §7.3.1: one job on ``ranks`` random hosts (whole servers on a topology of servers);
    ``x`` random (job host, outside host) pairs, each with ``p`` long-lived flows from the job
    host to the outside host.

    Randomness: ``scenario_seed(base_seed, setting_index, index)`` draws the placement and
    (through :class:`reactccl.netsim.RandomPairs`) the pairs.

    Raises:
        ValueError, BackgroundError: too few hosts, x > ranks, p < 1.
    """
    seed = scenario_seed(base_seed, setting_index, index)
    topo = topology(topology_spec)
    rng = np.random.default_rng([seed, 10])
    place = _job_hosts(rng, topo, ranks, topology_spec)
    flows, _ = resolve_background([RandomPairs(x, p, "out")], topo, np.asarray(place), seed)
    return Scenario(experiment, tuple(setting), index, seed, topology_spec,
                    (JobSpec(algorithm, ranks, float(message_bytes), place),), tuple(flows),
                    ecmp_ports=ecmp_ports, epochs=epochs, warmup=warmup)


def degraded_scenario(experiment: str, setting: Sequence[tuple[str, Any]], index: int, base_seed: int,
                      topology_spec: str, algorithm: str, rate: float, cables: int, *,
                      ranks: int = PAPER["ranks"], message_bytes: float = PAPER["message_bytes"],
                      epochs: int = PAPER["epochs"], warmup: int = PAPER["warmup"],
                      ecmp_ports: int = PAPER["ecmp_ports"], setting_index: int = 0) -> Scenario:
    """REACT §7.3.4: gray failures. ``cables`` random cables (both directions) among those the
    job's flows can take (host links, ToR/edge-aggregation and aggregation-core links of its
    paths; any of the fabric's three layers) run at ``rate`` bit/s. No external flows.

    Choosing among the cables the job can use (not the whole fabric) keeps every scenario
    relevant: a failure off the job's paths changes nothing for either arm.

    Raises:
        ValueError: ``cables`` < 1 or more than the job's paths use.
    """
    seed = scenario_seed(base_seed, setting_index, index)
    topo = topology(topology_spec)
    rng = np.random.default_rng([seed, 11])
    place = _job_hosts(rng, topo, ranks, topology_spec)
    pool = job_cables(topo, place)
    if not 1 <= cables <= len(pool):
        raise ValueError(f"{experiment}: cables must be in 1..{len(pool)} (cables on the job's paths), got {cables}")
    pick = pool[np.sort(rng.choice(len(pool), size=cables, replace=False))]
    degrade = tuple((int(l), float(rate)) for l in pick.reshape(-1) if l >= 0)
    return Scenario(experiment, tuple(setting), index, seed, topology_spec,
                    (JobSpec(algorithm, ranks, float(message_bytes), place),), degrade=degrade,
                    ecmp_ports=ecmp_ports, epochs=epochs, warmup=warmup)


def shared_nodes_scenario(experiment: str, setting: Sequence[tuple[str, Any]], index: int, base_seed: int,
                          algorithms: tuple[str, str], shared: int, *, ranks: int = PAPER["ranks"],
                          message_bytes: float = PAPER["message_bytes"], epochs: int = PAPER["epochs"],
                          warmup: int = PAPER["warmup"], setting_index: int = 0) -> Scenario:
    """REACT §7.3.3 (Fig 6): two jobs on a star of ``2 * ranks`` hosts; ``shared`` hosts run a
    rank of both jobs (chosen at random, at random rank positions of each job).

    Arms: both jobs static (baseline) and both with REACT.

    Raises:
        ValueError: ``shared`` not in 0..ranks.
    """
    if not 0 <= shared <= ranks:
        raise ValueError(f"{experiment}: shared nodes must be in 0..{ranks}, got {shared}")
    seed = scenario_seed(base_seed, setting_index, index)
    hosts = 2 * ranks
    rng = np.random.default_rng([seed, 12])
    perm = rng.permutation(hosts)
    common, only1, only2 = perm[:shared], perm[shared:ranks], perm[ranks:2 * ranks - shared]
    p1 = rng.permutation(np.concatenate([common, only1]))
    p2 = rng.permutation(np.concatenate([common, only2]))
    jobs = tuple(JobSpec(a, ranks, float(message_bytes), tuple(int(h) for h in p))
                 for a, p in zip(algorithms, (p1, p2)))
    return Scenario(experiment, tuple(setting), index, seed, f"star:hosts={hosts}", jobs, ecmp_ports=1,
                    epochs=epochs, warmup=warmup, arms=(("baseline", (False, False)), ("react", (True, True))),
                    extra=(("shared_hosts", sorted(int(h) for h in common)),))


def network_sharing_scenario(experiment: str, setting: Sequence[tuple[str, Any]], index: int, base_seed: int,
                             topology_spec: str, algorithms: tuple[str, str], tors: int, *,
                             ranks: int = PAPER["ranks"], message_bytes: float = PAPER["message_bytes"],
                             epochs: int = PAPER["epochs"], warmup: int = PAPER["warmup"],
                             ecmp_ports: int = PAPER["ecmp_ports"], setting_index: int = 0) -> Scenario:
    """REACT §7.3.3 (Fig 7): two jobs on a two-tier fabric (``alibaba``) sharing only the network.

    ``tors`` random ToRs are picked; each job gets ``ranks`` distinct random hosts under them,
    no host in both jobs, so the jobs meet only on ToR-aggregation links ("Spine-ToR congestion").
    Arms: baseline, REACT on job 1 only, REACT on both.

    Raises:
        ValueError: the ToRs have fewer than ``2 * ranks`` hosts.
    """
    seed = scenario_seed(base_seed, setting_index, index)
    topo = topology(topology_spec)
    rng = np.random.default_rng([seed, 13])
    tor_of = np.array([next(iter(topo.graph.successors(h))) for h in topo.hosts])
    names = np.unique(tor_of)
    if tors > len(names):
        raise ValueError(f"{experiment}: {tors} ToRs asked, {topology_spec} has {len(names)}")
    chosen = rng.choice(names, size=tors, replace=False)
    pool = np.flatnonzero(np.isin(tor_of, chosen))
    picked = _random_hosts(rng, pool, 2 * ranks, f"{experiment} ({tors} ToRs)")
    jobs = tuple(JobSpec(a, ranks, float(message_bytes), picked[k * ranks:(k + 1) * ranks])
                 for k, a in enumerate(algorithms))
    arms = (("baseline", (False, False)), ("react-job1", (True, False)), ("react-both", (True, True)))
    return Scenario(experiment, tuple(setting), index, seed, topology_spec, jobs, ecmp_ports=ecmp_ports,
                    epochs=epochs, warmup=warmup, arms=arms,
                    extra=(("tors", sorted(str(t) for t in chosen)),))

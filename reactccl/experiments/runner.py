"""Run a scenario's arms (baseline, REACT on some jobs) epoch by epoch on one simulated network.

Every arm gets a fresh :class:`reactccl.netsim.SimulatedNetwork` with the scenario's seed,
so the external flows, failed links and the ECMP port drawn for flow ``i`` at epoch
``e`` are the same in every arm; only the patterns differ. Each job is driven by a
policy: :class:`StaticPolicy` (the pattern never changes) or :class:`ReactPolicy`
(a :class:`reactccl.tuner.ReactController` that observes the job's own traces and
decides the pattern of later epochs). Several jobs run in one network epoch by epoch
(:meth:`SimulatedNetwork.run_jobs`), each controller seeing only its own trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..algorithms import generate
from ..netsim import Job, SimulatedNetwork
from ..pattern import CollectivePattern
from ..trace import EpochTrace
from .metrics import epoch_metrics, improvement
from .scenario import PAPER_OPTIONS, Scenario, topology

__all__ = ["ENGINES", "make_network", "Policy", "StaticPolicy", "ReactPolicy", "ArmRun", "ArmDriver", "run_arm", "run_scenario",
           "run_scenario_arm", "combine_arms"]


class Policy(Protocol):
    """What drives one job: the pattern to run at an epoch, and what to learn from its trace."""

    def pattern_for(self, epoch: int) -> CollectivePattern: ...

    def observe(self, trace: EpochTrace) -> None: ...


class StaticPolicy:
    """The baseline: ``pattern`` at every epoch."""

    def __init__(self, pattern: CollectivePattern) -> None:
        self.pattern = pattern

    def pattern_for(self, epoch: int) -> CollectivePattern:
        """The fixed pattern."""
        return self.pattern

    def observe(self, trace: EpochTrace) -> None:
        """Nothing to learn."""


class ReactPolicy:
    """REACT on one job: a :class:`reactccl.tuner.ReactController` over ``pattern``.

    Args:
        pattern: the job's initial pattern (positions = ranks).
        params: keyword arguments of :class:`reactccl.tuner.ReactParams` (Table 3 names),
            e.g. ``{"seed": 3}``.
    """

    def __init__(self, pattern: CollectivePattern, params: Mapping[str, Any] | None = None) -> None:
        from ..tuner import ReactController, ReactParams  # the tuner is optional for baseline-only runs

        self.params = ReactParams(**dict(params or {}))
        self.controller = ReactController(pattern, self.params)

    def pattern_for(self, epoch: int) -> CollectivePattern:
        """The pattern the controller has scheduled for ``epoch``."""
        return self.controller.pattern_for_epoch(epoch)

    def observe(self, trace: EpochTrace) -> None:
        """Feed the epoch's trace to the controller (it may schedule a new pattern)."""
        self.controller.observe(trace)

    @property
    def log(self):
        """The controller's decision log."""
        return self.controller.decisions


@dataclass
class ArmRun:
    """One arm of a scenario: per-epoch times (s) of each job, shape ``(epochs, jobs)``, the
    policies (for their logs and final patterns) and how many times each job's pattern changed."""

    name: str
    durations: np.ndarray
    policies: list[Any]
    changes: list[int]
    first: list[CollectivePattern]
    last: list[CollectivePattern]


#: Executors an arm can run on: ``fluid`` (:class:`reactccl.netsim.SimulatedNetwork`, max-min flows) and
#: ``packet`` (:class:`reactccl.packetsim.PacketNetwork`, ns-3 with REACT §7.3's DCTCP; needs reactccl[ns3]).
ENGINES = ("fluid", "packet")


def make_network(engine: str, *args: Any, **kwargs: Any):
    """The network of ``engine`` built with :class:`SimulatedNetwork`'s arguments.

    Raises:
        ValueError: unknown engine; PacketSimUnavailable: ``packet`` without ns-3.
    """
    if engine == "fluid":
        return SimulatedNetwork(*args, **kwargs)
    if engine == "packet":
        from ..packetsim import PacketNetwork  # optional: imports ns-3 only when built

        return PacketNetwork(args[0], "dctcp", *args[1:], start_rule="step", **kwargs)  # netsim's default order
    raise ValueError(f"engine {engine!r}: unknown; known: {', '.join(ENGINES)}")


def _same(a: CollectivePattern, b: CollectivePattern) -> bool:
    return a is b or (np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst))


class ArmDriver:
    """Steps one arm of ``scenario`` an epoch at a time; job ``k`` uses REACT iff ``react[k]``.

    REACT's seed is ``scenario.seed + k`` unless ``params`` sets one. After each
    :meth:`step`, ``durations[e, k]`` holds job k's epoch time and ``traces`` the last traces.

    Raises:
        ValueError: ``react`` of the wrong length; errors of the simulator and the generators.
    """

    def __init__(self, scenario: Scenario, react: Sequence[bool], name: str = "",
                 params: Mapping[str, Any] | None = None, engine: str = "fluid") -> None:
        if len(react) != len(scenario.jobs):
            raise ValueError(f"run_arm: {len(react)} REACT flags for {len(scenario.jobs)} jobs")
        self.scenario, self.name, self.engine = scenario, name, engine
        self.network = make_network(engine, topology(scenario.topology), scenario.background(),
                                    dict(scenario.degrade) or None, scenario.ecmp_ports, scenario.seed,
                                    reference_placement=np.asarray(scenario.jobs[0].placement))
        self.policies: list[Any] = []
        for k, (job, on) in enumerate(zip(scenario.jobs, react)):
            pattern = generate(job.algorithm, job.ranks, **PAPER_OPTIONS.get(job.algorithm, {}))
            if on:
                self.policies.append(ReactPolicy(pattern, {"seed": scenario.seed + k, **dict(params or {})}))
            else:
                self.policies.append(StaticPolicy(pattern))
        self.places = [np.asarray(j.placement, dtype=np.int64) for j in scenario.jobs]
        self.durations = np.zeros((scenario.epochs, len(scenario.jobs)))
        self.first = [pol.pattern_for(0) for pol in self.policies]
        self.current = list(self.first)
        self.changes = [0] * len(self.policies)
        self.epoch = 0
        self.traces: list[EpochTrace] = []

    def step(self) -> list[EpochTrace]:
        """Run the next epoch of every job; returns their traces.

        Raises:
            RuntimeError: all ``scenario.epochs`` epochs have run.
        """
        e = self.epoch
        if e >= self.scenario.epochs:
            raise RuntimeError(f"arm {self.name!r}: all {self.scenario.epochs} epochs have run")
        pats = [pol.pattern_for(e) for pol in self.policies]
        for k, pat in enumerate(pats):
            if not _same(pat, self.current[k]):
                self.changes[k] += 1
        self.current = pats
        jobs = [Job(pat, pl, j.message_bytes) for pat, pl, j in zip(pats, self.places, self.scenario.jobs)]
        self.traces = self.network.run_jobs(jobs)
        for k, (pol, tr) in enumerate(zip(self.policies, self.traces)):
            self.durations[e, k] = tr.duration
            pol.observe(tr)
        self.epoch += 1
        return self.traces

    def result(self) -> ArmRun:
        """The arm's record so far."""
        return ArmRun(self.name, self.durations[:self.epoch], self.policies, list(self.changes), self.first,
                      list(self.current))


def run_arm(scenario: Scenario, react: Sequence[bool], name: str = "", params: Mapping[str, Any] | None = None,
            on_epoch: Callable[[int], None] | None = None, engine: str = "fluid") -> ArmRun:
    """Run all jobs of ``scenario`` for ``scenario.epochs`` epochs (see :class:`ArmDriver`);
    ``on_epoch(e)`` is called after each epoch (progress bars)."""
    drv = ArmDriver(scenario, react, name, params, engine)
    for e in range(scenario.epochs):
        drv.step()
        if on_epoch is not None:
            on_epoch(e)
    return drv.result()


def _log_counts(policy: Any) -> dict[str, int]:
    """Decisions and reverts in a REACT policy's log (zeros for a static policy)."""
    log = getattr(policy, "log", None) or []
    return {"decisions": len(log), "reverts": sum(d.kind == "revert" for d in log)}


def run_scenario_arm(scenario: Scenario, arm: int, params: Mapping[str, Any] | None = None,
                     engine: str = "fluid") -> dict[str, Any]:
    """Run arm ``arm`` (an index into ``scenario.arms``) alone: the unit a sweep hands to a worker.

    Arms are independent (each builds its own network from the scenario's seed), so running
    them in separate processes gives what :func:`run_scenario` gives in one.

    Returns:
        ``{"name": arm name, "jobs": [metrics + changes per job], "epoch_times": [[s per job] per epoch]}``.

    Raises:
        IndexError: ``arm`` is not an arm of the scenario; errors of :func:`run_arm`.
    """
    if not 0 <= arm < len(scenario.arms):
        raise IndexError(f"arm {arm}: the scenario has {len(scenario.arms)} arms")
    name, react = scenario.arms[arm]
    run = run_arm(scenario, react, name, params, engine=engine)
    m = [epoch_metrics(run.durations[:, k], j.message_bytes, scenario.warmup) | {"changes": run.changes[k]}
         | _log_counts(run.policies[k]) for k, j in enumerate(scenario.jobs)]
    return {"name": name, "jobs": m, "epoch_times": run.durations.round(9).tolist()}


def combine_arms(scenario: Scenario, arms: Sequence[Mapping[str, Any]], engine: str = "fluid") -> dict[str, Any]:
    """The scenario's result (see :func:`run_scenario`) from its arms' results, in arm order.

    Raises:
        ValueError: the arms are not the scenario's, in its order.
    """
    names = [a["name"] for a in arms]
    if names != [n for n, _ in scenario.arms]:
        raise ValueError(f"combine_arms: got arms {names}, the scenario has {[n for n, _ in scenario.arms]}")
    metrics = {a["name"]: a["jobs"] for a in arms}
    base = metrics[names[0]]
    imp = {name: [improvement(m[k]["mean_algbw"], base[k]["mean_algbw"]) for k in range(len(base))]
           for name, m in metrics.items() if name != names[0]}
    p95 = {name: [improvement(m[k]["p95_algbw"], base[k]["p95_algbw"]) for k in range(len(base))]
           for name, m in metrics.items() if name != names[0]}
    out = {"scenario": scenario.to_json(), "arms": {a["name"]: {"jobs": a["jobs"], "epoch_times": a["epoch_times"]}
                                                    for a in arms},
           "improvement": imp, "p95_improvement": p95}
    if engine != "fluid":
        out["engine"] = engine
    return out


def run_scenario(scenario: Scenario, params: Mapping[str, Any] | None = None, engine: str = "fluid") -> dict[str, Any]:
    """Run every arm of ``scenario`` on ``engine`` (:data:`ENGINES`); a JSON-ready result.

    Returns:
        ``{"scenario": Scenario.to_json(), "arms": {name: {"jobs": [metrics + changes per job],
        "epoch_times": [[s per job] per epoch]}}, "improvement": {arm: [% per job]},
        "p95_improvement": {arm: [% per job]}}`` where improvements compare mean algbw
        (and p95 algbw) of each arm with the first (baseline) arm after the warm-up.
    """
    return combine_arms(scenario, [run_scenario_arm(scenario, a, params, engine) for a in range(len(scenario.arms))],
                        engine)

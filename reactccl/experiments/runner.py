"""Run a scenario's arms (baseline, REACT on some jobs) epoch by epoch on one simulated network.

Every arm gets a fresh :class:`reactccl.netsim.SimulatedNetwork` with the scenario's seed,
so the external flows, failed links and the ECMP port drawn for flow ``i`` at epoch
``e`` are the same in every arm; only the patterns differ. Each job has a controller
(:mod:`reactccl.contract`): a :class:`~reactccl.contract.StaticController` (the pattern never
changes) or a :class:`reactccl.tuner.ReactController` that observes the job's own traces and
decides the pattern of later epochs. Several jobs run in one network epoch by epoch
(:meth:`SimulatedNetwork.run_jobs`, driven by :class:`reactccl.contract.Drive`), each controller
seeing only its own trace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..contract import Controller, Drive, StaticController
from ..netsim import SimulatedNetwork
from ..packetsim import PacketNetwork
from ..pattern import CollectivePattern
from ..trace import EpochTrace
from ..traffic import Job
from ..tuner import ReactController, ReactParams
from .metrics import epoch_metrics, improvement
from .scenario import Scenario, job_pattern, topology

__all__ = ["ENGINES", "make_network", "ArmRun", "ArmDriver", "run_arm", "run_scenario", "run_scenario_arm",
           "combine_arms"]


@dataclass
class ArmRun:
    """One arm of a scenario: per-epoch times (s) of each job, shape ``(epochs, jobs)``, the
    controllers (for REACT's decision logs) and how many times each job's pattern changed."""

    name: str
    durations: np.ndarray
    controllers: list[Controller]
    changes: list[int]
    first: list[CollectivePattern]
    last: list[CollectivePattern]


#: Executors an arm can run on: ``fluid`` (:class:`reactccl.netsim.SimulatedNetwork`, max-min flows) and
#: ``packet`` (:class:`reactccl.packetsim.PacketNetwork`, ns-3 with REACT §7.3's DCTCP; needs reactccl[ns3]).
ENGINES = ("fluid", "packet")


def make_network(engine: str, *args: Any, netsim_engine: str | None = None, **kwargs: Any):
    """The network of ``engine`` built with :class:`SimulatedNetwork`'s arguments; ``netsim_engine``
    is the fluid network's own engine (``"compiled"`` or ``"python"``; None: its default).

    Raises:
        ValueError: unknown engine; PacketSimUnavailable: ``packet`` without ns-3.
    """
    if engine == "fluid":
        return SimulatedNetwork(*args, **kwargs) if netsim_engine is None else \
            SimulatedNetwork(*args, engine=netsim_engine, **kwargs)
    if engine == "packet":
        return PacketNetwork(args[0], "dctcp", *args[1:], start_rule="step", **kwargs)  # netsim's default order
    raise ValueError(f"engine {engine!r}: unknown; known: {', '.join(ENGINES)}")


class ArmDriver(Drive):
    """One arm of ``scenario`` as a :class:`~reactccl.contract.Drive` over one network's
    ``run_jobs``; job ``k`` uses REACT iff ``react[k]``. Step it an epoch at a time
    (:meth:`~reactccl.contract.Drive.step`) or run it (:meth:`~reactccl.contract.Drive.run`).

    REACT's seed is ``scenario.seed + k`` unless ``params`` (keyword arguments of
    :class:`reactccl.tuner.ReactParams`, Table 3 names) sets one. ``netsim_engine`` picks the fluid
    network's engine (``"compiled"`` or ``"python"``, :data:`reactccl.netsim.ENGINES`; None: its
    default). After each step,
    ``durations[e, k]`` holds job k's epoch time and ``traces`` the last traces.

    Raises:
        ValueError: ``react`` of the wrong length; errors of the simulator and the generators.
    """

    def __init__(self, scenario: Scenario, react: Sequence[bool], name: str = "",
                 params: Mapping[str, Any] | None = None, engine: str = "fluid",
                 netsim_engine: str | None = None) -> None:
        if len(react) != len(scenario.jobs):
            raise ValueError(f"run_arm: {len(react)} REACT flags for {len(scenario.jobs)} jobs")
        self.scenario, self.name, self.engine = scenario, name, engine
        self.network = make_network(engine, topology(scenario.topology), scenario.background(),
                                    dict(scenario.degrade) or None, scenario.ecmp_ports, scenario.seed,
                                    reference_placement=np.asarray(scenario.jobs[0].placement),
                                    netsim_engine=netsim_engine)
        controllers: list[Controller] = []
        for k, (job, on) in enumerate(zip(scenario.jobs, react, strict=True)):
            pattern = job_pattern(job, scenario.topology)
            if on:
                controllers.append(ReactController(pattern, ReactParams(**{"seed": scenario.seed + k,
                                                                           **dict(params or {})})))
            else:
                controllers.append(StaticController(pattern))
        self.places = [np.asarray(j.placement, dtype=np.int64) for j in scenario.jobs]
        super().__init__(controllers, scenario.epochs, run_jobs=self._run_jobs)

    def _run_jobs(self, patterns: list[CollectivePattern]) -> list[EpochTrace]:
        jobs = [Job(pat, pl, j.message_bytes) for pat, pl, j in zip(patterns, self.places, self.scenario.jobs,
                                                                    strict=True)]
        return self.network.run_jobs(jobs)

    def result(self) -> ArmRun:
        """The arm's record so far."""
        return ArmRun(self.name, self.durations[:self.epoch], self.controllers, list(self.changes), self.first,
                      list(self.current))


def run_arm(scenario: Scenario, react: Sequence[bool], name: str = "", params: Mapping[str, Any] | None = None,
            on_epoch: Callable[[int], None] | None = None, engine: str = "fluid") -> ArmRun:
    """Run all jobs of ``scenario`` for ``scenario.epochs`` epochs (see :class:`ArmDriver`);
    ``on_epoch(e)`` is called after each epoch (progress bars)."""
    drv = ArmDriver(scenario, react, name, params, engine)
    drv.run(None if on_epoch is None else (lambda e, traces: on_epoch(e)))
    return drv.result()


def _log_counts(controller: Controller) -> dict[str, int]:
    """Decisions and reverts in a REACT controller's log (zeros for a static controller)."""
    log = getattr(controller, "decisions", None) or []
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
         | _log_counts(run.controllers[k]) for k, j in enumerate(scenario.jobs)]
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

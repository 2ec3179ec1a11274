"""The README's demo: one congested cluster, the same seeded run with and without REACT.

Default scenario: 8-rank NCCL double binary tree AllReduce of 20 MB on a 16-host star
(100 Gbps, 1 µs links), ranks on hosts 0-7, and ``p = 2`` long-lived external flows from an
outside host into the host of a rank that sits at interior tree positions. Both arms run the
same scenario (same external flows, same ECMP draws) in lockstep, epoch by epoch; metrics
are taken after the warm-up (the paper measures after epoch 25, §7.3).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .metrics import epoch_metrics, improvement
from .patterns_view import busiest_receiver, moved_positions, pattern_view, tree_parents
from .runner import ArmDriver
from .scenario import PAPER, JobSpec, Scenario, job_pattern, topology

__all__ = ["DemoConfig", "DemoResult", "demo_scenario", "netsim_engine", "run_demo"]

SCHEMA = "reactccl.demo/1"


@dataclass(frozen=True)
class DemoConfig:
    """The demo's knobs (defaults: the scenario in the module docstring).

    Attributes:
        topology: topology spec; ranks go on hosts ``0..ranks-1``, the external flows come
            from host ``ranks`` (so the topology needs ``ranks + 1`` hosts or more).
        algorithm, ranks, message_bytes: the job.
        p: external long-lived flows into the congested rank's host.
        rank: the congested rank (None: :func:`busiest_receiver` of the initial pattern).
        epochs, warmup, seed, ecmp_ports: as in :class:`reactccl.experiments.Scenario`.
        options: generator options of the job, ``(("hierarchy", "flat"),)`` (on a topology of
            servers ``ring`` and ``nccl-tree`` are NCCL's hierarchical patterns unless these say
            otherwise, :func:`reactccl.experiments.scenario.job_pattern`).
    """

    topology: str = "star:hosts=16"
    algorithm: str = "nccl-tree"
    ranks: int = PAPER["ranks"]
    message_bytes: float = PAPER["message_bytes"]
    p: int = 2
    rank: int | None = None
    epochs: int = PAPER["epochs"]
    warmup: int = PAPER["warmup"]
    seed: int = 0
    ecmp_ports: int = PAPER["ecmp_ports"]
    options: tuple[tuple[str, Any], ...] = ()


def demo_scenario(cfg: DemoConfig) -> tuple[Scenario, int]:
    """The demo's scenario and its congested rank.

    Raises:
        ValueError: p < 1, a rank out of range, or a topology with fewer than ``ranks + 1`` hosts.
    """
    if cfg.p < 1:
        raise ValueError(f"p: expected >= 1 external flows, got {cfg.p}")
    topo = topology(cfg.topology)
    if topo.num_hosts < cfg.ranks + 1:
        raise ValueError(f"topology {cfg.topology}: {topo.num_hosts} hosts, the demo needs {cfg.ranks + 1} "
                         f"({cfg.ranks} ranks and one outside host)")
    job = JobSpec(cfg.algorithm, cfg.ranks, float(cfg.message_bytes), tuple(range(cfg.ranks)), tuple(cfg.options))
    rank = busiest_receiver(job_pattern(job, cfg.topology)) if cfg.rank is None else int(cfg.rank)
    if not 0 <= rank < cfg.ranks:
        raise ValueError(f"rank: expected 0..{cfg.ranks - 1}, got {rank}")
    flows = ((cfg.ranks, rank),) * cfg.p
    sc = Scenario("demo", (("p", cfg.p), ("rank", rank)), 0, int(cfg.seed), cfg.topology, (job,), flows,
                  ecmp_ports=cfg.ecmp_ports, epochs=cfg.epochs, warmup=cfg.warmup)
    return sc, rank


@dataclass
class DemoResult:
    """What the demo found; :meth:`to_json` is the ``--json`` document. ``traces``: every epoch's
    :class:`~reactccl.trace.EpochTrace` per arm (``"baseline"``, ``"react"``) when
    :func:`run_demo` was asked to keep them, else empty."""

    config: DemoConfig
    scenario: Scenario
    rank: int
    baseline: ArmDriver
    react: ArmDriver
    wall_s: float
    traces: dict[str, list] = field(default_factory=dict)

    def metrics(self) -> dict[str, dict[str, float]]:
        """:func:`epoch_metrics` of both arms after the warm-up."""
        S, w = self.config.message_bytes, self.config.warmup
        return {"baseline": epoch_metrics(self.baseline.durations[:, 0], S, w),
                "react": epoch_metrics(self.react.durations[:, 0], S, w)}

    def gains(self) -> dict[str, float]:
        """Percent gains of REACT: ``mean_algbw``, ``p95_algbw`` (algbw improvement) and
        ``mean_time`` and ``p95_time`` (reduction of the epoch time)."""
        m = self.metrics()
        b, r = m["baseline"], m["react"]
        return {"mean_algbw": improvement(r["mean_algbw"], b["mean_algbw"]),
                "p95_algbw": improvement(r["p95_algbw"], b["p95_algbw"]),
                "mean_time": (1 - r["mean_time"] / b["mean_time"]) * 100,
                "p95_time": (1 - r["p95_time"] / b["p95_time"]) * 100}

    @property
    def controller(self):
        """REACT's controller (its ``decisions`` log)."""
        return self.react.controllers[0]

    def before_after(self) -> dict[str, Any]:
        """The pattern before and after: chunk-graph views, parent arrays of trees, moved positions."""
        first, last = self.react.first[0], self.react.current[0]

        def parents(p):
            out = {}
            for g in sorted(p.chunk_graphs()):
                par = tree_parents(p, g)
                out[str(g)] = None if par is None else par.tolist()
            return out

        return {"before": {"view": pattern_view(first), "tree_parents": parents(first)},
                "after": {"view": pattern_view(last), "tree_parents": parents(last)},
                "moved": moved_positions(first, last)}

    def to_json(self) -> dict[str, Any]:
        """The machine-readable result."""
        return {"schema": SCHEMA, "scenario": self.scenario.to_json(), "congested_rank": self.rank,
                "external_flows_per_host": self.config.p, "metrics": self.metrics(), "gains_percent": self.gains(),
                "patterns": self.before_after(), "decisions": [d.to_dict() for d in self.controller.decisions],
                "pattern_changes": self.react.changes[0],
                "epoch_times": {"baseline": self.baseline.durations[:, 0].tolist(),
                                "react": self.react.durations[:, 0].tolist()},
                "wall_s": self.wall_s}


#: Largest demo that runs on the simulator's pure-Python reference engine: at most this many flows
#: in the job's pattern and :data:`SMALL_P` external flows (see :func:`netsim_engine`).
SMALL_FLOWS = 128
SMALL_P = 8


def netsim_engine(cfg: DemoConfig) -> str | None:
    """The flow-level engine the demo runs on: ``"python"`` (netsim's pure-Python reference) for a
    small demo (a pattern of at most :data:`SMALL_FLOWS` flows, at most :data:`SMALL_P` external
    flows: the default is 8 ranks, 28 flows, 2 external flows), else None (netsim's default, the
    compiled core; ``$REACTCCL_NETSIM_ENGINE`` when set, for either size).

    Why: on the demo's scenario the reference takes the time of the compiled core (measured on 2
    loaded cores: 2.5 against 2.2 s of CPU for the whole default demo; 16 ranks, 8 external flows
    on fat-tree:k=8, 2.9 against 2.3 s), and the compiled core costs about 30 s of CPU to compile on
    a machine's first run. Both engines give the same epochs (``tests/test_netsim_compiled.py``;
    the demo's JSON is equal on both, ``tests/test_startup.py``). A 16-rank ring (480 flows) is
    1.7 times slower on the reference, so larger demos keep the compiled core.
    """
    if os.environ.get("REACTCCL_NETSIM_ENGINE"):
        return None
    job = JobSpec(cfg.algorithm, cfg.ranks, float(cfg.message_bytes), tuple(range(cfg.ranks)), tuple(cfg.options))
    flows = job_pattern(job, cfg.topology).num_flows
    return "python" if flows <= SMALL_FLOWS and cfg.p <= SMALL_P else None


def run_demo(cfg: DemoConfig = DemoConfig(), params: Mapping[str, Any] | None = None,
             on_epoch: Callable[[int, float, float], None] | None = None, engine: str = "fluid",
             keep_traces: bool = False) -> DemoResult:
    """Run the baseline and REACT arms of the demo scenario in lockstep (``engine="packet"``: one
    after the other, as ns-3 runs one network per process). ``engine="fluid"`` runs on the engine
    :func:`netsim_engine` picks.

    ``on_epoch(e, baseline_time, react_time)`` is called after each epoch (progress bars; with the
    packet engine after each REACT epoch, the baseline having run first). ``keep_traces``: keep
    every epoch's trace of both arms in :attr:`DemoResult.traces` (for ``--trace``).

    Raises:
        ValueError: see :func:`demo_scenario`; PacketSimUnavailable: ``packet`` without ns-3.
    """
    sc, rank = demo_scenario(cfg)
    kept: dict[str, list] = {"baseline": [], "react": []} if keep_traces else {}

    def step(arm: ArmDriver, name: str) -> float:
        trace = arm.step()[0]
        if keep_traces:
            kept[name].append(trace)
        return trace.duration

    t0 = time.perf_counter()
    if engine == "packet":
        base = ArmDriver(sc, (False,), "baseline", params, engine)
        for _ in range(sc.epochs):
            step(base, "baseline")
        react = ArmDriver(sc, (True,), "react", params, engine)
        for e in range(sc.epochs):
            tr = step(react, "react")
            if on_epoch is not None:
                on_epoch(e, float(base.durations[e, 0]), tr)
        return DemoResult(cfg, sc, rank, base, react, time.perf_counter() - t0, kept)
    fluid = netsim_engine(cfg)
    base = ArmDriver(sc, (False,), "baseline", params, engine, fluid)
    react = ArmDriver(sc, (True,), "react", params, engine, fluid)
    for e in range(sc.epochs):
        tb = step(base, "baseline")
        tr = step(react, "react")
        if on_epoch is not None:
            on_epoch(e, tb, tr)
    return DemoResult(cfg, sc, rank, base, react, time.perf_counter() - t0, kept)


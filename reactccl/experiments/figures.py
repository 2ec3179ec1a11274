"""The paper's simulation experiments (REACT §7.3, Appendix C.2, C.3) as scenario sweeps.

Each :class:`Experiment` builds its scenarios from a :class:`SweepConfig` (the paper's
settings, or a reduced ``quick`` sweep for tests) and says how to plot and label its
results, with the numbers the paper's text gives for comparison. Choices the text
leaves open are made here and stated in each experiment's ``notes``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..suggest import did_you_mean
from .metrics import default_warmup
from .scenario import (
    PAPER, Scenario, degraded_scenario, network_sharing_scenario, random_pairs_scenario, shared_nodes_scenario,
)

__all__ = ["SweepConfig", "Experiment", "EXPERIMENTS", "get_experiment"]

FAT_TREE = "fat-tree:k=8"   # the paper's 128-server Clos (Al-Fares k=8: 128 hosts)
STAR = "star:hosts=16"      # 8 job hosts and 8 outside hosts on one switch
ALIBABA = "alibaba"         # 48 ToRs x 3 aggregation switches x 15 servers = 720 servers


@dataclass(frozen=True)
class SweepConfig:
    """How big a sweep is: scenarios per setting, epochs, warm-up, the base seed, and
    ``quick`` (each experiment then keeps only a few of its settings)."""

    scenarios: int = 10
    epochs: int = PAPER["epochs"]
    warmup: int = PAPER["warmup"]
    seed: int = 0
    quick: bool = False

    @classmethod
    def make(cls, quick: bool = False, scenarios: int | None = None, epochs: int | None = None,
             warmup: int | None = None, seed: int = 0, default_scenarios: int = 10) -> "SweepConfig":
        """The paper's sweep, or with ``quick`` 2 scenarios of 30 epochs (warm-up 10); explicit
        values override either. With ``epochs`` given and ``warmup`` not, the warm-up is the
        default one if it is shorter than the run, else a quarter of the run (as ``simulate``).

        Raises:
            ValueError: scenarios or epochs < 1, or a given warmup not in 0..epochs-1.
        """
        base = cls(2, 30, 10, seed, True) if quick else cls(default_scenarios, PAPER["epochs"], PAPER["warmup"], seed)
        epochs = base.epochs if epochs is None else int(epochs)
        if warmup is None:
            warmup = default_warmup(epochs, base.warmup)
        cfg = replace(base, scenarios=base.scenarios if scenarios is None else int(scenarios),
                      epochs=epochs, warmup=int(warmup))
        if cfg.scenarios < 1:
            raise ValueError(f"scenarios: expected >= 1, got {cfg.scenarios}")
        if cfg.epochs < 1:
            raise ValueError(f"epochs: expected >= 1, got {cfg.epochs}")
        if not 0 <= cfg.warmup < cfg.epochs:
            raise ValueError(f"warmup: expected 0..epochs-1 (epochs={cfg.epochs}), got {cfg.warmup}")
        return cfg


@dataclass(frozen=True)
class Experiment:
    """One figure of the paper.

    Attributes:
        name, title: e.g. ``"fig5a"``, the figure's caption in short.
        build: ``SweepConfig -> list[Scenario]``.
        x: the setting key (or ``"arm"``/``"job_name"``) on the plot's x-axis.
        series: keys whose values make the bar groups' series.
        panels: keys whose values make separate subplots.
        metric: ``"improvement"`` (mean algbw) or ``"p95_improvement"`` (algbw of the p95 epoch).
        job_names: names of the jobs (multi-job experiments).
        paper: ``row -> text`` the paper gives for that setting ('' if none).
        overall: ``(label, row filter, paper text)`` summaries over several settings.
        notes: choices made where the paper is silent.
    """

    name: str
    title: str
    build: Callable[[SweepConfig], list[Scenario]]
    x: str
    series: tuple[str, ...] = ()
    panels: tuple[str, ...] = ()
    metric: str = "improvement"
    job_names: tuple[str, ...] = ()
    paper: Callable[[dict[str, Any]], str] = lambda row: ""
    overall: tuple[tuple[str, Callable[[dict[str, Any]], bool], str], ...] = ()
    notes: str = ""
    default_scenarios: int = 10
    params: dict[str, Any] = field(default_factory=dict)


def _pairs_sweep(name: str, topo: str, algorithm: str, cfg: SweepConfig) -> list[Scenario]:
    xs, ps = ((1, 4), (2,)) if cfg.quick else ((1, 2, 4, 8), (1, 2, 4))
    out = []
    for si, (x, p) in enumerate((x, p) for p in ps for x in xs):
        for i in range(cfg.scenarios):
            out.append(random_pairs_scenario(name, (("x", x), ("p", p)), i, cfg.seed, topo, algorithm, x, p,
                                             epochs=cfg.epochs, warmup=cfg.warmup, setting_index=si))
    return out


def _fig5_paper(mean: int) -> Callable[[dict[str, Any]], str]:
    def text(row: dict[str, Any]) -> str:
        return "up to 20%" if row["setting"]["p"] == 1 else f"up to 60-95% (mean {mean}%)"
    return text


def _high(row: dict[str, Any]) -> bool:
    return row["setting"]["p"] >= 2


def _fig6(cfg: SweepConfig) -> list[Scenario]:
    shared = (0, 4, 8) if cfg.quick else tuple(range(9))
    return [shared_nodes_scenario("fig6", (("shared", s),), i, cfg.seed, ("nccl-tree", "ring"), s,
                                  epochs=cfg.epochs, warmup=cfg.warmup, setting_index=si)
            for si, s in enumerate(shared) for i in range(cfg.scenarios)]


def _fig7(cfg: SweepConfig) -> list[Scenario]:
    pairs = (("ring+ring", ("ring", "ring")), ("rd+ring", ("recursive-doubling", "ring")))
    topo = "alibaba:tors=8,aggs=3,hosts=15" if cfg.quick else ALIBABA
    return [network_sharing_scenario("fig7", (("jobs", label),), i, cfg.seed, topo, algos, tors=4,
                                     epochs=cfg.epochs, warmup=cfg.warmup, setting_index=si)
            for si, (label, algos) in enumerate(pairs) for i in range(cfg.scenarios)]


def _fig8(cfg: SweepConfig) -> list[Scenario]:
    rates = (30e9,) if cfg.quick else (30e9, 50e9, 80e9)
    return [degraded_scenario("fig8", (("rate_gbps", int(r / 1e9)),), i, cfg.seed, FAT_TREE, "nccl-tree", r, 2,
                              epochs=cfg.epochs, warmup=cfg.warmup, setting_index=si)
            for si, r in enumerate(rates) for i in range(cfg.scenarios)]


def _fig13(cfg: SweepConfig) -> list[Scenario]:
    ports = (1, 4) if cfg.quick else (1, 2, 4, 8)
    sizes = (2e6,) if cfg.quick else (100e3, 2e6, 20e6)
    ps = (4,) if cfg.quick else (1, 4)
    out, si = [], 0
    for p in ps:
        for s in sizes:
            for k in ports:
                label = f"{s / 1e6:g}MB" if s >= 1e6 else f"{s / 1e3:g}KB"
                for i in range(cfg.scenarios):
                    out.append(random_pairs_scenario("fig13", (("p", p), ("size", label), ("ports", k)), i, cfg.seed,
                                                     FAT_TREE, "nccl-tree", 2, p, message_bytes=s, epochs=cfg.epochs,
                                                     warmup=cfg.warmup, ecmp_ports=k, setting_index=si))
                si += 1
    return out


EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment(
        "fig5a", "8-node NCCL tree AllReduce, fat-tree k=8, x pairs with p external flows each",
        lambda cfg: _pairs_sweep("fig5a", FAT_TREE, "nccl-tree", cfg), x="x", series=("p",),
        paper=_fig5_paper(35), overall=(("p in {2,4}", _high, "mean 35%, up to 60-95%"),),
        notes="Random placement of the 8 ranks among 128 hosts; x distinct ranks each send p long-lived "
              "flows to one random outside host (§7.3.1: sources in the job, destinations elsewhere)."),
    Experiment(
        "fig5b", "8-node recursive doubling AllGather, fat-tree k=8, x pairs with p external flows each",
        lambda cfg: _pairs_sweep("fig5b", FAT_TREE, "recursive-doubling", cfg), x="x", series=("p",),
        paper=_fig5_paper(15), overall=(("p in {2,4}", _high, "mean 15%, up to 60-95%"),),
        notes="As fig5a with recursive doubling AllGather."),
    Experiment(
        "fig6", "two jobs (tree, ring AllReduce) on a star, 0-8 shared hosts, REACT on both",
        _fig6, x="shared", series=("job_name",), job_names=("job 1 (tree)", "job 2 (ring)"), default_scenarios=5,
        notes="star of 16 hosts; shared hosts run a rank of both jobs (random hosts, random rank positions); "
              "no external flows; fixed paths (one port)."),
    Experiment(
        "fig7", "two jobs on the Alibaba-style fabric, network sharing only",
        _fig7, x="arm", series=("job_name",), panels=("jobs",), job_names=("job 1", "job 2"), default_scenarios=5,
        paper=lambda row: ("both jobs gain (text)" if row["arm"] == "react-job1"
                           else "gains, less than job-1-only (text)"),
        notes="Both jobs' 16 hosts are random hosts under 4 random ToRs (no host shared): they meet on "
              "ToR-aggregation links. Arms: REACT on job 1 only, REACT on both."),
    Experiment(
        "fig8", "8-node NCCL tree AllReduce, fat-tree k=8, partial link failures",
        _fig8, x="rate_gbps", paper=lambda row: "up to 20%",
        notes="2 random cables among those on the job's fewest-hop paths (any of the three layers) run at the "
              "given rate, both directions; 4-way ECMP; no external flows."),
    Experiment(
        "fig12", "8-node NCCL tree AllReduce, star, x pairs with p external flows each",
        lambda cfg: _pairs_sweep("fig12", STAR, "nccl-tree", cfg), x="x", series=("p",),
        paper=lambda row: "higher than fig5a (C.2)",
        overall=(("p in {2,4}", _high, "§4.3 example (16 ranks, 2 MB, p=2, reduce only): 14%"),),
        notes="star of 16 hosts (8 outside hosts); otherwise as fig5a."),
    Experiment(
        "fig13", "p95 epoch: 1/2/4/8 ECMP ports, 100 KB / 2 MB / 20 MB, p = 1 and 4",
        _fig13, x="ports", panels=("p", "size"), metric="p95_improvement",
        notes="x = 2 congested pairs per scenario; improvement of the algbw of the p95 epoch time."),
)}


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise KeyError(f"unknown experiment {name!r}{did_you_mean(name, EXPERIMENTS)}; "
                       f"known: {', '.join(EXPERIMENTS)}") from None

"""Run many scenarios in parallel with a progress bar, and aggregate their improvements per setting.

Scenarios, and the arms of one scenario (each arm builds its own network from the scenario's
seed), are independent, so a sweep maps :func:`reactccl.experiments.runner.run_scenario_arm`
over every (scenario, arm) with a :class:`concurrent.futures.ProcessPoolExecutor` (``jobs``
workers; ``jobs=1`` runs in this process) and joins each scenario's arms when its last one is
back (:func:`~reactccl.experiments.runner.combine_arms`); or, with ``cluster=``, as tasks on a
Dask distributed cluster (optional
extra ``reactccl[cluster]``: a pure-Python wheel whose futures API matches the pool's, with
``dask scheduler`` / ``dask worker ADDRESS`` to span machines; Ray would bring a large binary
runtime for the same map). Results come back in scenario order whatever order they finish in.
A task per arm, not per scenario, halves the longest task of a two-arm packet-level sweep
(one ns-3 arm is minutes) and keeps every worker busy when there are fewer scenarios than workers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .metrics import summarize
from .runner import combine_arms, run_scenario, run_scenario_arm
from .scenario import Scenario

__all__ = ["run_sweep", "aggregate", "default_jobs"]


def default_jobs() -> int:
    """Worker processes by default: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _progress(console: Console | None) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=False)


def _dask_client(cluster: str):
    """A Dask client: ``auto`` starts a local cluster (one single-threaded worker process per usable
    CPU), anything else is a scheduler address such as ``tcp://10.0.0.5:8786``.

    Raises:
        ValueError: Dask is not installed (names the extra).
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ValueError("--cluster needs Dask's distributed scheduler: pip install 'reactccl[cluster]'") from None
    if cluster == "auto":
        return Client(LocalCluster(n_workers=default_jobs(), threads_per_worker=1, processes=True,
                                   dashboard_address=None))
    return Client(cluster)


class _Joiner:
    """Collects arm results per scenario; a scenario is done (bar advanced) with its last arm."""

    def __init__(self, scenarios: Sequence[Scenario], engine: str, bar, task) -> None:
        self.scenarios, self.engine, self.bar, self.task = scenarios, engine, bar, task
        self.arms: list[list[dict | None]] = [[None] * len(sc.arms) for sc in scenarios]
        self.results: list[dict | None] = [None] * len(scenarios)

    def tasks(self) -> list[tuple[int, int]]:
        """Every (scenario index, arm index)."""
        return [(i, a) for i, sc in enumerate(self.scenarios) for a in range(len(sc.arms))]

    def add(self, i: int, a: int, result: dict) -> None:
        self.arms[i][a] = result
        if all(r is not None for r in self.arms[i]):
            sc = self.scenarios[i]
            self.results[i] = combine_arms(sc, self.arms[i], self.engine)
            if self.bar:
                self.bar.update(self.task, advance=1, description=f"{sc.experiment} {sc.setting_dict} #{sc.index}")


def _run_on_dask(scenarios: Sequence[Scenario], params, engine: str, cluster: str, joiner: _Joiner) -> None:
    client = _dask_client(cluster)
    from distributed import as_completed as dask_completed

    try:
        futures = [client.submit(run_scenario_arm, scenarios[i], a, params, engine, pure=False,
                                 key=f"scenario-{i}-arm-{a}") for i, a in joiner.tasks()]
        index = {f.key: ia for f, ia in zip(futures, joiner.tasks())}
        for fut in dask_completed(futures):
            joiner.add(*index[fut.key], fut.result())
    finally:
        client.close()


def run_sweep(scenarios: Sequence[Scenario], jobs: int | None = None, params: Mapping[str, Any] | None = None,
              progress: bool = True, console: Console | None = None, label: str = "scenarios",
              engine: str = "fluid", cluster: str | None = None) -> list[dict]:
    """Run every scenario (all its arms); results in the order of ``scenarios``.

    Args:
        jobs: worker processes (default :func:`default_jobs`); 1 runs serially here.
        params: REACT parameters for every controller (:class:`reactccl.tuner.ReactParams` names).
        engine: ``fluid`` or ``packet`` (:data:`reactccl.experiments.runner.ENGINES`).
        cluster: ``None`` (the process pool), ``"auto"`` (a local Dask cluster) or a Dask scheduler
            address (``tcp://host:8786``, a multi-machine cluster); every (scenario, arm) is an
            independent task, so results are the same as the pool's, and as a serial run's, for
            the same seeds.
        progress: show a rich progress bar (on ``console``).

    Raises:
        ValueError: ``jobs`` < 1; ``cluster`` without Dask installed. Errors raised inside a scenario propagate.
    """
    jobs = default_jobs() if jobs is None else int(jobs)
    if jobs < 1:
        raise ValueError(f"jobs: expected >= 1, got {jobs}")
    bar = _progress(console) if progress else None
    task = bar.add_task(label, total=len(scenarios)) if bar else None
    joiner = _Joiner(scenarios, engine, bar, task)
    if bar:
        bar.start()
    try:
        if cluster is not None:
            _run_on_dask(scenarios, params, engine, cluster, joiner)
        elif jobs == 1 or len(joiner.tasks()) <= 1:
            for i, sc in enumerate(scenarios):
                joiner.results[i] = run_scenario(sc, params, engine)
                if bar:
                    bar.advance(task)
        else:
            todo = joiner.tasks()
            with ProcessPoolExecutor(max_workers=min(jobs, len(todo))) as pool:
                futures = {pool.submit(run_scenario_arm, scenarios[i], a, params, engine): (i, a) for i, a in todo}
                for fut in as_completed(futures):
                    joiner.add(*futures[fut], fut.result())
    finally:
        if bar:
            bar.stop()
    return [r for r in joiner.results if r is not None]


def aggregate(results: Sequence[dict], job_names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Improvement summaries per (setting, arm, job), settings in order of first appearance.

    Returns:
        Rows ``{"setting": {...}, "arm": name, "job": k, "job_name": str, "improvement":
        summarize(mean-algbw improvements), "p95_improvement": summarize(p95 ones),
        "baseline_algbw": mean over scenarios of the baseline's mean algbw (bytes/s),
        "arm_algbw": the same for the arm, "baseline_p95_algbw"/"arm_p95_algbw": the same for the
        algbw of the p95 epoch, "changes": mean pattern changes}``.

    Raises:
        ValueError: an empty ``results``.
    """
    if not results:
        raise ValueError("aggregate: no results")
    groups: dict[tuple, list[dict]] = {}
    for r in results:
        key = tuple(sorted(r["scenario"]["setting"].items()))
        groups.setdefault(key, []).append(r)
    rows = []
    for key, rs in groups.items():
        base_name = next(iter(rs[0]["arms"]))
        for arm in rs[0]["improvement"]:
            for k in range(len(rs[0]["improvement"][arm])):
                name = job_names[k] if job_names and k < len(job_names) else f"job {k + 1}"
                rows.append({
                    "setting": dict(rs[0]["scenario"]["setting"]), "arm": arm, "job": k, "job_name": name,
                    "improvement": summarize([r["improvement"][arm][k] for r in rs]),
                    "p95_improvement": summarize([r["p95_improvement"][arm][k] for r in rs]),
                    "baseline_algbw": sum(r["arms"][base_name]["jobs"][k]["mean_algbw"] for r in rs) / len(rs),
                    "arm_algbw": sum(r["arms"][arm]["jobs"][k]["mean_algbw"] for r in rs) / len(rs),
                    "baseline_p95_algbw": sum(r["arms"][base_name]["jobs"][k]["p95_algbw"] for r in rs) / len(rs),
                    "arm_p95_algbw": sum(r["arms"][arm]["jobs"][k]["p95_algbw"] for r in rs) / len(rs),
                    "changes": sum(r["arms"][arm]["jobs"][k]["changes"] for r in rs) / len(rs),
                })
    return rows

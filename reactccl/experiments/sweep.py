"""Run many scenarios in parallel with a progress bar, and aggregate their improvements per setting.

Scenarios are independent, so a sweep maps :func:`reactccl.experiments.runner.run_scenario`
over them with a :class:`concurrent.futures.ProcessPoolExecutor` (``jobs`` workers; ``jobs=1``
runs in this process), or, with ``cluster=``, as tasks on a Dask distributed cluster (optional
extra ``reactccl[cluster]``: a pure-Python wheel whose futures API matches the pool's, with
``dask scheduler`` / ``dask worker ADDRESS`` to span machines; Ray would bring a large binary
runtime for the same map). Results come back in scenario order whatever order they finish in.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .metrics import summarize
from .runner import run_scenario
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


def _run_on_dask(scenarios: Sequence[Scenario], params, engine: str, cluster: str, bar, task) -> list[dict]:
    client = _dask_client(cluster)
    from distributed import as_completed as dask_completed

    try:
        futures = [client.submit(run_scenario, sc, params, engine, pure=False, key=f"scenario-{i}")
                   for i, sc in enumerate(scenarios)]
        index = {f.key: i for i, f in enumerate(futures)}
        results: list[dict | None] = [None] * len(scenarios)
        for fut in dask_completed(futures):
            i = index[fut.key]
            results[i] = fut.result()
            if bar:
                sc = scenarios[i]
                bar.update(task, advance=1, description=f"{sc.experiment} {sc.setting_dict} #{sc.index}")
        return results
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
            address (``tcp://host:8786``, a multi-machine cluster); scenarios are independent tasks,
            so results are the same as the pool's for the same seeds.
        progress: show a rich progress bar (on ``console``).

    Raises:
        ValueError: ``jobs`` < 1; ``cluster`` without Dask installed. Errors raised inside a scenario propagate.
    """
    jobs = default_jobs() if jobs is None else int(jobs)
    if jobs < 1:
        raise ValueError(f"jobs: expected >= 1, got {jobs}")
    results: list[dict | None] = [None] * len(scenarios)
    bar = _progress(console) if progress else None
    task = bar.add_task(label, total=len(scenarios)) if bar else None
    if bar:
        bar.start()
    try:
        if cluster is not None:
            results = _run_on_dask(scenarios, params, engine, cluster, bar, task)
        elif jobs == 1 or len(scenarios) <= 1:
            for i, sc in enumerate(scenarios):
                results[i] = run_scenario(sc, params, engine)
                if bar:
                    bar.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=min(jobs, len(scenarios))) as pool:
                futures = {pool.submit(run_scenario, sc, params, engine): i for i, sc in enumerate(scenarios)}
                for fut in as_completed(futures):
                    results[futures[fut]] = fut.result()
                    if bar:
                        bar.advance(task)
    finally:
        if bar:
            bar.stop()
    return [r for r in results if r is not None]


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

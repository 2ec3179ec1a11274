"""Run an experiment end to end: sweep, aggregate, JSON, PNG plot and a printed table.

``run_experiment("fig5a")`` is what ``reactccl experiment fig5a`` calls.
"""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from .figures import Experiment, SweepConfig, get_experiment
from .metrics import summarize
from .outputs import existing, result_stem
from .sweep import aggregate, default_jobs, run_sweep

__all__ = ["run_experiment", "experiment_table", "plot_experiment", "row_value", "SCHEMA"]

SCHEMA = "reactccl.experiment/1"


def row_value(row: Mapping[str, Any], key: str) -> Any:
    """A row's value for ``key``: a setting field, or ``arm``/``job_name``/``job``.

    Raises:
        KeyError: ``key`` is neither.
    """
    if key in row["setting"]:
        return row["setting"][key]
    if key in ("arm", "job_name", "job"):
        return row[key]
    raise KeyError(f"row has no field {key!r}; settings: {sorted(row['setting'])}")


def _overall(exp: Experiment, rows: Sequence[Mapping[str, Any]], results: Sequence[Mapping[str, Any]]) -> list[dict]:
    out = []
    for label, keep, paper in exp.overall:
        chosen = [r for r in rows if keep(r)]
        if not chosen:
            continue
        vals = [v for r in chosen for v in r[exp.metric]["values"]]
        out.append({"label": label, "paper": paper, exp.metric: summarize(vals)})
    arm_vals = [v for r in rows for v in r[exp.metric]["values"]]
    out.append({"label": "all settings", "paper": "", exp.metric: summarize(arm_vals)})
    return out


def run_experiment(name: str, quick: bool = False, jobs: int | None = None, out: str | Path = "results",
                   seed: int = 0, scenarios: int | None = None, epochs: int | None = None,
                   warmup: int | None = None, params: Mapping[str, Any] | None = None, progress: bool = True,
                   console: Console | None = None, plot: bool = True, cluster: str | None = None) -> dict[str, Any]:
    """Run experiment ``name`` and write ``OUT/STEM.json`` and ``OUT/STEM.png``, STEM the name and the
    settings that differ from the defaults (:func:`reactccl.experiments.outputs.result_stem`:
    ``fig5a``; ``fig5a-epochs20-quick``), so a reduced run never replaces the full one;
    ``files["replaced"]`` lists the files an earlier run with the same settings had written.

    Args:
        quick: the reduced sweep (few settings, 2 scenarios of 30 epochs).
        jobs: worker processes (default: all usable CPUs).
        scenarios, epochs, warmup: override the sweep's size.
        params: REACT parameters for every controller.
        cluster: a Dask cluster (``auto`` or a scheduler address) instead of the process pool.

    Returns:
        The JSON document (``schema``, ``experiment``, ``config``, ``rows`` from
        :func:`reactccl.experiments.sweep.aggregate` with the paper's text, ``overall``,
        ``scenarios`` (every scenario with its arms' metrics and epoch times), ``wall_s``,
        ``files``).

    Raises:
        KeyError: unknown experiment; ValueError: a bad sweep size.
    """
    exp = get_experiment(name)
    cfg = SweepConfig.make(quick, scenarios, epochs, warmup, seed, exp.default_scenarios)
    scen = exp.build(cfg)
    jobs = default_jobs() if jobs is None else jobs
    t0 = time.perf_counter()
    results = run_sweep(scen, jobs, {**exp.params, **dict(params or {})}, progress, console, label=name,
                        cluster=cluster)
    wall = time.perf_counter() - t0
    rows = aggregate(results, exp.job_names or None)
    for r in rows:
        r["paper"] = exp.paper(r)
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    stem = result_stem(exp.name, {"quick": quick, "scenarios": scenarios, "epochs": epochs, "warmup": warmup,
                                  "seed": seed or None, "params": dict(params or {})})
    doc = {"schema": SCHEMA, "experiment": exp.name, "title": exp.title, "metric": exp.metric, "notes": exp.notes,
           "config": {"scenarios_per_setting": cfg.scenarios, "epochs": cfg.epochs, "warmup": cfg.warmup,
                      "seed": cfg.seed, "quick": cfg.quick, "jobs": jobs, "scenario_count": len(scen),
                      "params": dict(params or {})},
           "rows": rows, "overall": _overall(exp, rows, results), "scenarios": results, "wall_s": wall,
           "files": {}}
    path, png = outdir / f"{stem}.json", outdir / f"{stem}.png"
    doc["files"]["replaced"] = existing([path, png] if plot else [path])
    if plot:
        plot_experiment(exp, rows, png)
        doc["files"]["png"] = str(png)
    doc["files"]["json"] = str(path)
    path.write_text(json.dumps(doc, indent=1))
    return doc


def experiment_table(doc: Mapping[str, Any]) -> Table:
    """A rich table: per setting (and arm/job), mean, min and max improvement (%) next to the
    paper's text, the mean algbw (or, for p95 experiments, the algbw of the p95 epoch) of baseline
    and arm (GB/s, averaged over scenarios) and the mean pattern changes."""
    exp = get_experiment(doc["experiment"])
    metric = doc["metric"]
    rows = doc["rows"]
    keys = list(rows[0]["setting"]) if rows else []
    multi_arm = len({r["arm"] for r in rows}) > 1
    multi_job = len({r["job"] for r in rows}) > 1
    what = "p95 algbw" if metric == "p95_improvement" else "mean algbw"
    t = Table(title=f"{exp.name}: {exp.title}\nimprovement of {what} with REACT over the baseline, "
                    f"after epoch {doc['config']['warmup']}",
              caption="max: the paper's 'up to X% (in the worst-case scenario)'; min: REACT's worst result; "
                      "changes: pattern switches per run (trials and reverts)")
    for k in keys:
        t.add_column(k, justify="right")
    if multi_arm:
        t.add_column("arm")
    if multi_job:
        t.add_column("job")
    p95 = metric == "p95_improvement"
    bw = ("baseline_p95_algbw", "arm_p95_algbw") if p95 else ("baseline_algbw", "arm_algbw")
    for c in ("n", "mean %", "min %", "max %", "base GB/s" + (" p95" if p95 else ""),
              "REACT GB/s" + (" p95" if p95 else ""), "changes"):
        t.add_column(c, justify="right")
    t.add_column("paper")
    for r in rows:
        s = r[metric]
        cells = [str(r["setting"][k]) for k in keys]
        if multi_arm:
            cells.append(r["arm"])
        if multi_job:
            cells.append(r["job_name"])
        cells += [str(s["n"]), f"{s['mean']:+.1f}", f"{s['min']:+.1f}", f"{s['max']:+.1f}",
                  f"{r[bw[0]] / 1e9:.2f}", f"{r[bw[1]] / 1e9:.2f}", f"{r['changes']:.1f}",
                  r.get("paper", "")]
        t.add_row(*cells)
    for o in doc["overall"]:
        s = o[metric]
        lead = len(keys) + multi_arm + multi_job
        cells = [o["label"]] + [""] * (lead - 1)
        cells += [str(s["n"]), f"{s['mean']:+.1f}", f"{s['min']:+.1f}", f"{s['max']:+.1f}", "", "", "", o["paper"]]
        t.add_row(*cells, style="bold")
    return t


def _ordered(values: Sequence[Any]) -> list[Any]:
    seen: list[Any] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def plot_experiment(exp: Experiment, rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Grouped bars of the mean improvement (%) with every scenario's value as a dot, one
    subplot per panel value; written as a PNG (matplotlib, Agg backend)."""
    import matplotlib  # start-up cost: matplotlib only when drawing
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = exp.metric
    panels = _ordered([tuple(row_value(r, k) for k in exp.panels) for r in rows])
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(6.0, 4.4 * ncols), 0.6 + 3.4 * nrows), squeeze=False,
                             sharey=True)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, pv in zip(axes.flat, panels):
        sub = [r for r in rows if tuple(row_value(r, k) for k in exp.panels) == pv]
        xs = _ordered([row_value(r, exp.x) for r in sub])
        series = _ordered([tuple(row_value(r, k) for k in exp.series) for r in sub])
        width = 0.8 / max(1, len(series))
        for si, sv in enumerate(series):
            label = ", ".join(f"{k}={v}" if k != "job_name" else str(v) for k, v in zip(exp.series, sv))
            for xi, xv in enumerate(xs):
                match = [r for r in sub if row_value(r, exp.x) == xv
                         and tuple(row_value(r, k) for k in exp.series) == sv]
                if not match:
                    continue
                s = match[0][metric]
                pos = xi - 0.4 + width * (si + 0.5)
                ax.bar(pos, s["mean"], width * 0.9, color=f"C{si}", label=label if xi == 0 else None)
                ax.scatter(np.full(len(s["values"]), pos), s["values"], s=8, color="k", zorder=3)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(range(len(xs)), [str(x) for x in xs])
        ax.set_xlabel(exp.x)
        if exp.panels:
            ax.set_title(", ".join(f"{k}={v}" for k, v in zip(exp.panels, pv)), fontsize=9)
        if series and series[0]:
            ax.legend(fontsize=7)
    what = "p95 algbw" if metric == "p95_improvement" else "mean algbw"
    for row in axes:
        row[0].set_ylabel(f"{what} improvement (%)")
    fig.suptitle("\n".join(textwrap.wrap(f"{exp.name}: {exp.title}", 70)), fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

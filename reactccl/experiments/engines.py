"""One experiment on both engines: the same scenarios on the fluid simulator and on ns-3, side by side.

``reactccl experiment NAME --engine packet`` runs a *reduced* sweep by default (packet-level epochs
take seconds, fluid ones milliseconds): the settings in :data:`PACKET_SETTINGS` (e.g. fig5a and fig12
at x in {1, 4}, p in {2, 4}), :data:`PACKET_SWEEP` scenarios per setting and epochs (REACT decides
every B = 6 epochs, so 20 epochs leave it two trials after the warm-up); ``--scenarios``,
``--epochs``, ``--warmup`` and ``--size`` override. Every scenario runs on both engines with the
same seeds, placements, external flows and ECMP draws, so per setting the table shows REACT's gain
and the baseline's algbw under max-min sharing and under DCTCP, next to the paper's numbers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..packetsim.native import load
from .figures import SweepConfig, get_experiment
from .scenario import Scenario
from .sweep import aggregate, default_jobs, run_sweep

__all__ = ["PACKET_SETTINGS", "PACKET_SWEEP", "reduced_scenarios", "run_both_engines", "engines_table"]

SCHEMA = "reactccl.experiment-engines/1"
#: Settings kept in the packet-level reduced sweep, per experiment (others: the ``--quick`` settings).
PACKET_SETTINGS: dict[str, dict[str, tuple]] = {
    "fig5a": {"x": (1, 4), "p": (2, 4)},
    "fig5b": {"x": (1, 4), "p": (2, 4)},
    "fig12": {"x": (1, 4), "p": (2, 4)},
    "fig8": {"rate_gbps": (30,)},
}
#: The reduced sweep's size: scenarios per setting, epochs, warm-up epochs.
PACKET_SWEEP = {"scenarios": 1, "epochs": 20, "warmup": 8}


def reduced_scenarios(name: str, scenarios: int | None = None, epochs: int | None = None,
                      warmup: int | None = None, seed: int = 0, size: float | None = None) -> list[Scenario]:
    """The packet-level reduced sweep of experiment ``name`` (see the module docstring); ``size``
    replaces every job's message size (bytes).

    Raises:
        KeyError: unknown experiment; ValueError: a bad sweep size.
    """
    exp = get_experiment(name)
    keep = PACKET_SETTINGS.get(name)
    cfg = SweepConfig.make(keep is None, scenarios if scenarios is not None else PACKET_SWEEP["scenarios"],
                           epochs if epochs is not None else PACKET_SWEEP["epochs"],
                           warmup if warmup is not None else PACKET_SWEEP["warmup"], seed)
    scen = exp.build(cfg)
    if keep is not None:
        scen = [s for s in scen if all(s.setting_dict.get(k) in v for k, v in keep.items())]
    if size is not None:
        scen = [replace(s, jobs=tuple(replace(j, message_bytes=float(size)) for j in s.jobs)) for s in scen]
    return scen


def run_both_engines(name: str, out: str | Path = "results", jobs: int | None = None,
                     params: Mapping[str, Any] | None = None, progress: bool = True,
                     console: Console | None = None, cluster: str | None = None, **sweep: Any) -> dict[str, Any]:
    """Run the reduced sweep of ``name`` on the fluid and the packet engine; writes
    ``OUT/NAME-engines.json``.

    Returns:
        ``{"schema", "experiment", "config", "engines": {"fluid": rows, "packet": rows}, "wall_s": {...},
        "scenarios": {engine: results}, "files"}`` with rows from :func:`aggregate`.

    Raises:
        PacketSimUnavailable: ns-3 is not installed; errors of :func:`reduced_scenarios`.
    """
    load()  # fail now, not in a worker
    exp = get_experiment(name)
    scen = reduced_scenarios(name, **sweep)
    jobs = default_jobs() if jobs is None else jobs
    merged = {**exp.params, **dict(params or {})}
    engines, walls, results = {}, {}, {}
    for engine in ("fluid", "packet"):
        t0 = time.perf_counter()
        res = run_sweep(scen, jobs, merged, progress, console, label=f"{name} {engine}", engine=engine,
                        cluster=cluster)
        walls[engine] = time.perf_counter() - t0
        rows = aggregate(res, exp.job_names or None)
        for r in rows:
            r["paper"] = exp.paper(r)
        engines[engine], results[engine] = rows, res
    s0 = scen[0]
    doc = {"schema": SCHEMA, "experiment": name, "title": exp.title, "metric": exp.metric,
           "config": {"scenario_count": len(scen), "epochs": s0.epochs, "warmup": s0.warmup,
                      "message_bytes": s0.jobs[0].message_bytes, "settings": PACKET_SETTINGS.get(name, "quick"),
                      "transport": "dctcp (REACT §7.3)", "jobs": jobs, "params": dict(params or {})},
           "engines": engines, "wall_s": walls, "scenarios": results, "files": {}}
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / f"{name}-engines.json"
    doc["files"]["json"] = str(path)
    path.write_text(json.dumps(doc, indent=1))
    return doc


def engines_table(doc: Mapping[str, Any]) -> Table:
    """Per setting (and arm/job): REACT's mean improvement (%) and the baseline's algbw on each engine,
    with the paper's text."""
    metric = doc["metric"]
    fluid, packet = doc["engines"]["fluid"], doc["engines"]["packet"]
    keys = list(fluid[0]["setting"]) if fluid else []
    cfg = doc["config"]
    t = Table(title=f"{doc['experiment']}: {doc['title']}\nreduced sweep: {cfg['scenario_count']} scenarios, "
                    f"{cfg['epochs']} epochs (metrics after epoch {cfg['warmup']}), "
                    f"{cfg['message_bytes'] / 1e6:g} MB; packet level: {cfg['transport']}")
    for k in keys:
        t.add_column(k, justify="right")
    multi = len({(r["arm"], r["job"]) for r in fluid}) > 1
    if multi:
        t.add_column("arm/job")
    for c in ("n", "fluid %", "packet %", "fluid base GB/s", "packet base GB/s", "changes f/p", "paper"):
        t.add_column(c, justify="right" if c != "paper" else "left")
    for f, p in zip(fluid, packet):
        cells = [str(f["setting"][k]) for k in keys]
        if multi:
            cells.append(f"{f['arm']} {f['job_name']}")
        cells += [str(f[metric]["n"]), f"{f[metric]['mean']:+.1f}", f"{p[metric]['mean']:+.1f}",
                  f"{f['baseline_algbw'] / 1e9:.2f}", f"{p['baseline_algbw'] / 1e9:.2f}",
                  f"{f['changes']:.1f}/{p['changes']:.1f}", f.get("paper", "")]
        t.add_row(*cells)
    return t

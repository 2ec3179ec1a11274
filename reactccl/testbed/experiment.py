"""The paper's testbed experiment (REACT §7.2, Table 2; Fig 11 in C.1) on the emulated cluster.

For each host count N and number p of external flows: build the star
(:class:`~.testbed.Testbed`), start p bulk TCP flows into one rank (the
*victim*: by default the rank that receives the largest share of the message in
the initial pattern, a tree's busiest inner node), and run
:mod:`.worker` on every host: AllReduce epochs of the static pattern
(baseline), the same pattern under REACT, and ``dist.all_reduce`` (the paper's
NCCL curve; Gloo here), interleaved ABAB. Reported per (N, p): mean and p95
epoch time of each, the ratios baseline/REACT (the paper's speedup), and the
number of pattern changes REACT made.

With ``ranks_per_host`` G > 1 every host namespace runs G ranks (a server: its ranks talk over
the namespace's loopback, unshaped, and share the host's shaped link, its one NIC). The ranks learn
that grouping (:mod:`reactccl.runtime.grouping`) and run NCCL's hierarchical ring or tree on it
(one NIC per host: ``nics=1`` unless ``options`` says otherwise); the victim is then a host, the
one that receives the largest share of the message from other hosts, and shares are counted on the
host links.

Differences from the paper, on purpose: Gloo over TCP on shaped veths instead of
NCCL on 200 Gbit/s Slingshot; flows are TCP bulk transfers, not RDMA
ping-pong; a few MB and tens of epochs instead of 100 MB and 5k epochs.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..runtime.argcheck import allreduce_algorithm_error
from ..runtime.grouping import HIERARCHICAL, plan_servers, server_pattern
from .launcher import MAX_PER_HOST
from .netns import TestbedConfigError, TestbedError
from .testbed import Testbed
from .worker import MODES, host_in_fraction

__all__ = ["ExperimentConfig", "run_experiment", "summarize", "format_table", "plot_cdf",
           "default_victim", "PAPER_TABLE2"]

#: REACT Table 2 (speedup baseline/REACT, mean and p95, and mean number of changes).
PAPER_TABLE2 = {(4, 0): (0.964, 0.999, 34), (4, 1): (1.138, 1.101, 35.6), (4, 2): (1.348, 1.145, 33.2),
                (8, 0): (0.963, 0.980, 41.25), (8, 1): (1.180, 1.165, 40), (8, 2): (1.383, 1.222, 36.25)}


@dataclass
class ExperimentConfig:
    """Settings of :func:`run_experiment` (defaults: the paper's grid, scaled to one machine).

    Attributes:
        hosts: host counts N to run.
        flows: external flow counts p.
        rate: link rate (tc units).
        mbytes: AllReduce message size in MB (float32 elements).
        epochs: epochs per segment; rounds: segments per mode (ABAB interleaving).
        skip: epochs at the start of each mode left out of the statistics (REACT's
            first decision lands after one batch plus the 5-epoch delay).
        algorithm: pattern generator name.
        modes: subset of ("baseline", "react", "nccl", "flat") (:mod:`.worker`).
        victim: congested rank; None = :func:`default_victim`.
        control: give REACT's control plane its own unshaped network.
        react_options: extra keyword arguments for ``ReactAllReduce``.
        timeout: seconds allowed for one (N, p) run.
        ranks_per_host: ranks G in every host namespace (a server of G GPUs with one NIC).
        options: generator options for the pattern of every mode; None = ``{"nics": 1}`` for a
            hierarchical algorithm with G > 1 (a host has one link), else none.
    """

    hosts: Sequence[int] = (4, 8)
    flows: Sequence[int] = (0, 1, 2)
    rate: str = "200mbit"
    mbytes: float = 4.0
    epochs: int = 30
    rounds: int = 2
    skip: int = 12
    algorithm: str = "nccl-tree"
    modes: Sequence[str] = ("baseline", "react", "nccl")
    victim: int | None = None
    control: bool = True
    react_options: dict = field(default_factory=dict)
    timeout: float = 900.0
    ranks_per_host: int = 1
    options: dict | None = None

    def pattern_options(self) -> dict:
        """The generator options the ranks get (``options``, or its default: see the class)."""
        if self.options is not None:
            return dict(self.options)
        return {"nics": 1} if self.ranks_per_host > 1 and self.algorithm in HIERARCHICAL else {}

    def check(self) -> None:
        """Raise TestbedConfigError naming the first bad setting (before any testbed is built)."""
        bad = allreduce_algorithm_error(self.algorithm, "algorithm")
        if bad:
            raise TestbedConfigError(bad)
        if not self.hosts or any(not 2 <= int(n) <= 250 for n in self.hosts):
            raise TestbedConfigError(f"hosts {list(self.hosts)}: every host count must be in 2..250")
        if not self.flows or any(not 0 <= int(p) <= 64 for p in self.flows):
            raise TestbedConfigError(f"flows {list(self.flows)}: every external flow count must be in 0..64")
        if not self.modes or any(m not in MODES for m in self.modes):
            raise TestbedConfigError(f"modes {list(self.modes)}: choose from {', '.join(MODES)}")
        for name in ("epochs", "rounds"):
            if getattr(self, name) < 1:
                raise TestbedConfigError(f"{name}: expected an integer >= 1, got {getattr(self, name)}")
        if not 0 <= self.skip < self.epochs * self.rounds:
            raise TestbedConfigError(f"skip: expected 0..epochs*rounds-1 ({self.epochs * self.rounds - 1}), "
                                     f"got {self.skip}")
        if not self.mbytes > 0 or not self.timeout > 0:
            raise TestbedConfigError(f"mbytes and timeout must be > 0, got {self.mbytes}, {self.timeout}")
        if self.victim is not None and not all(0 <= self.victim < n for n in self.hosts):
            raise TestbedConfigError(f"victim: host {self.victim} is not in every job (hosts {list(self.hosts)})")
        g = self.ranks_per_host
        if isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= MAX_PER_HOST:
            raise TestbedConfigError(f"ranks_per_host: expected an integer in 1..{MAX_PER_HOST}, got {g!r}")
        if not isinstance(self.options, dict | None):
            raise TestbedConfigError(f"options: expected a dict of generator options, got {self.options!r}")


def job_pattern(algorithm: str, hosts: int, per_host: int = 1, options: dict | None = None):
    """The pattern the worker's ranks build on ``hosts`` hosts of ``per_host`` ranks (ranks
    host-major, as the launcher starts them, so the grouping they learn is this one), and the host
    of every rank: ``(pattern, host_of_rank)``."""
    grouping = plan_servers([{"host": f"h{r // per_host}"} for r in range(hosts * per_host)])
    return (server_pattern(algorithm, hosts * per_host, grouping, **(options or {})),
            grouping.server_of_rank())


def default_victim(algorithm: str, n: int, per_host: int = 1, options: dict | None = None) -> int:
    """The host receiving the largest share of the message from other hosts in the job's pattern
    (:func:`job_pattern`; lowest host on ties): where congestion on a host link hurts a static
    pattern most. With one rank per host: the busiest receiving rank."""
    p, host = job_pattern(algorithm, n, per_host, options)
    return int(np.argmax(host_in_fraction(p, host)))


def run_experiment(cfg: ExperimentConfig, out_dir: str | Path,
                   progress: Callable[[str], None] = print) -> dict:
    """Run every (N, p) of ``cfg``; write ``out_dir/results.json`` and return the results.

    Raises:
        TestbedConfigError: a bad setting (:meth:`ExperimentConfig.check`, before anything runs).
        TestbedError: no root/iproute2, or a run failed (the failing rank's output is included).
    """
    cfg.check()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = {"config": asdict(cfg), "runs": []}
    cpu0, t0 = os.times(), time.monotonic()
    g = cfg.ranks_per_host
    for n in cfg.hosts:
        victim = (default_victim(cfg.algorithm, n, g, cfg.pattern_options()) if cfg.victim is None
                  else cfg.victim)
        with Testbed(hosts=n, rate=cfg.rate, control=cfg.control) as tb:
            for p in cfg.flows:
                ranks = f"{n} hosts x {g} ranks" if g > 1 else f"{n} hosts"
                progress(f"N={ranks} p={p}: victim host {victim}, {len(cfg.modes)} modes x "
                         f"{cfg.rounds} x {cfg.epochs} epochs of {cfg.mbytes:g} MB at {cfg.rate}")
                if p:
                    tb.congest(into=victim, flows=p)
                    time.sleep(1.0)  # let the external flows reach their share
                try:
                    run = _run_once(tb, cfg, out / f"n{n}_p{p}.json")
                finally:
                    tb.stop_congestion()
                run.update(hosts=n, flows=p, victim=victim, ranks_per_host=g)
                results["runs"].append(run)
                progress("  " + _one_line(run, cfg.skip))
    cpu1 = os.times()
    results["wall_s"] = time.monotonic() - t0
    results["cpu_s"] = sum(getattr(cpu1, k) - getattr(cpu0, k)
                           for k in ("user", "system", "children_user", "children_system"))
    (out / "results.json").write_text(json.dumps(results))
    return results


def _run_once(tb: Testbed, cfg: ExperimentConfig, path: Path) -> dict:
    path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "reactccl.testbed.worker", "--modes", ",".join(cfg.modes),
           "--algorithm", cfg.algorithm, "--mbytes", str(cfg.mbytes), "--epochs", str(cfg.epochs),
           "--rounds", str(cfg.rounds), "--react", json.dumps(cfg.react_options),
           "--options", json.dumps(cfg.pattern_options()), "--out", str(path)]
    res = tb.run(cmd, timeout=cfg.timeout, stream=False, ranks_per_host=cfg.ranks_per_host)
    if res.returncode != 0 or not path.exists():
        who = res.failed_rank if res.failed_rank is not None else 0
        raise TestbedError(f"experiment run on {tb.hosts} hosts x {cfg.ranks_per_host} ranks failed "
                           f"(exit {res.returncode}, rank {who}):\n{res.output[who][-3000:]}")
    return json.loads(path.read_text())


def _stats(times: Sequence[float], skip: int) -> tuple[float, float]:
    xs = np.asarray(times[skip:] if len(times) > skip else times, dtype=float)
    return float(xs.mean()), float(np.percentile(xs, 95))


def summarize(results: dict, skip: int | None = None) -> list[dict]:
    """One row per (N, p): mean/p95 epoch time (s) per mode, the ratios baseline/REACT,
    REACT's pattern changes, and where the victim host ended up, as its share of the message
    received from other hosts (the bytes through its congested downlink, in units of the message
    size; with one rank per host, all it receives):
    ``victim_in_before`` in the initial pattern, ``victim_in_after`` in REACT's last one,
    and ``victim_in_measured``, the mean over REACT's measured epochs (those after
    ``skip``) of the pattern each of them ran (so a trial or revert near the end does not
    hide where the victim spent the measured epochs).

    Why bytes and not fan-in (the most flows the victim receives in one step): in
    ``nccl-tree`` a rank that is a leaf of both trees receives one half-message flow from
    each tree in the last step, fan-in 2, as an inner node does in the first step, yet
    it receives half as much in all (1.0 against 2.0 of the message)."""
    skip = results["config"]["skip"] if skip is None else skip
    rows = []
    for run in results["runs"]:
        row = {"hosts": run["hosts"], "flows": run["flows"], "victim": run["victim"],
               "ranks_per_host": run.get("ranks_per_host", 1)}
        for m, entry in run["modes"].items():
            row[f"{m}_mean"], row[f"{m}_p95"] = _stats(entry["epoch_times"], skip)
        if "react" in run["modes"]:
            r = run["modes"]["react"]
            row["changes"] = r.get("changes")
            v = run["victim"]
            key = "host_in_fraction" if "host_in_fraction" in run else "in_fraction"   # older results: per rank
            row["victim_in_before"] = run[key][v]
            row["victim_in_after"] = r[key][v]
            row["victim_in_measured"] = _measured_share(run, r, v, skip)
            if "baseline" in run["modes"]:
                row["speedup_mean"] = row["baseline_mean"] / row["react_mean"]
                row["speedup_p95"] = row["baseline_p95"] / row["react_p95"]
        rows.append(row)
    return rows


def _measured_share(run: dict, react: dict, victim: int, skip: int) -> float:
    """Mean over REACT's epochs ``skip..`` of the victim's received share under the pattern
    in force (changes apply from their epoch on; REACT's epochs count across its segments).
    Shares are per host (``host_in_fraction``) where the results have them, else per rank (older
    results, one rank per host). Results without the per-change shares fall back to the final
    pattern's."""
    host = "host_in_fraction" in run
    key = "host_in_fraction" if host else "in_fraction"
    shares = react.get("change_host_in_fraction" if host else "change_in_fraction")
    if shares is None:
        return react[key][victim]
    n = len(react["epoch_times"])
    epochs = np.arange(skip if n > skip else 0, n)
    starts = np.asarray(react["change_epochs"], dtype=int)
    per_change = np.array([run[key][victim]] + [s[victim] for s in shares])
    return float(per_change[np.searchsorted(starts, epochs, side="right")].mean())


def format_table(rows: list[dict]) -> str:
    """Table 2 layout: N (hosts; ``HxG`` with G ranks per host), p, speedup (mean, p95), changes,
    epoch times (with a ``flat`` column when a row has that mode), and the paper's values (one rank
    per host only)."""
    flat = any("flat_mean" in r for r in rows)
    flat_head = f" {'flat':>9}" if flat else ""
    head = (f"{'N':>4} {'p':>2} | {'speedup mean':>12} {'p95':>6} {'changes':>7} | "
            f"{'baseline':>9} {'REACT':>9} {'all_reduce':>10}{flat_head} (mean s) | victim in-share | "
            "paper mean/p95/chg")
    lines = [head, "-" * len(head)]
    for r in rows:
        g = r.get("ranks_per_host", 1)
        n = f"{r['hosts']}x{g}" if g > 1 else str(r["hosts"])
        paper = PAPER_TABLE2.get((r["hosts"], r["flows"])) if g == 1 else None  # the paper: one rank per host
        ptxt = f"{paper[0]:.3f}/{paper[1]:.3f}/{paper[2]:g}" if paper else "-"
        sm, sp = r.get("speedup_mean"), r.get("speedup_p95")
        share = (f"{r['victim_in_before']:.2f} -> {r['victim_in_measured']:.2f}"
                 if "victim_in_measured" in r else "-")
        lines.append(
            f"{n:>4} {r['flows']:>2} | {_f(sm, 12, 3)} {_f(sp, 6, 3)} {_f(r.get('changes'), 7, 0)} | "
            f"{_f(r.get('baseline_mean'), 9, 3)} {_f(r.get('react_mean'), 9, 3)} "
            f"{_f(r.get('nccl_mean'), 10, 3)}{' ' + _f(r.get('flat_mean'), 9, 3) if flat else ''} | "
            f"{share:>15} | {ptxt}")
    return "\n".join(lines)


def _f(v, width: int, prec: int) -> str:
    return f"{v:>{width}.{prec}f}" if v is not None else f"{'-':>{width}}"


def _one_line(run: dict, skip: int) -> str:
    parts = []
    for m, e in run["modes"].items():
        mean, p95 = _stats(e["epoch_times"], skip)
        parts.append(f"{m} mean {mean * 1e3:.0f} ms p95 {p95 * 1e3:.0f} ms")
    if "react" in run["modes"]:
        parts.append(f"{run['modes']['react'].get('changes')} changes")
    return "; ".join(parts)


def plot_cdf(results: dict, path: str | Path, skip: int | None = None) -> None:
    """Fig 11-style CDFs of epoch time: one panel per (N, p > 0) (rows N, columns p), with
    that p's baseline, REACT and all_reduce (solid) and the p = 0 curves of the same N
    (dotted) as references. Writes a PNG to ``path``."""
    import matplotlib  # start-up cost: matplotlib only when drawing
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    skip = results["config"]["skip"] if skip is None else skip
    runs = {(r["hosts"], r["flows"]): r for r in results["runs"]}
    panels = sorted(k for k in runs if k[1] > 0) or sorted(runs)
    ns = sorted({n for n, _ in panels})
    ps = sorted({p for _, p in panels})
    fig, axes = plt.subplots(len(ns), len(ps), figsize=(4.8 * len(ps), 3.6 * len(ns)), squeeze=False)
    names = {"baseline": "baseline", "react": "REACT", "nccl": "all_reduce", "flat": "flat pattern"}
    colors = {"baseline": "tab:green", "react": "tab:red", "nccl": "tab:blue", "flat": "tab:gray"}
    for ax_row in axes:
        for ax in ax_row:
            ax.set_visible(False)
    for (n, p) in panels:
        ax = axes[ns.index(n)][ps.index(p)]
        ax.set_visible(True)
        for (pp, style) in ((p, "-"), (0, ":")):
            run = runs.get((n, pp))
            if run is None or (pp == 0 and p == 0 and style == ":"):
                continue
            for m, e in run["modes"].items():
                xs = np.sort(np.asarray(e["epoch_times"][skip:]) * 1e3)
                ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), style, color=colors.get(m),
                        label=f"{names.get(m, m)} p={pp}")
        g = runs[(n, p)].get("ranks_per_host", 1)
        ax.set_title(f"N={n}{f' x {g} ranks' if g > 1 else ''}, p={p}")
        ax.set_xlabel("epoch time (ms)")
        ax.set_ylabel("CDF")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

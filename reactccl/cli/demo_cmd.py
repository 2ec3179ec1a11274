"""``reactccl demo``: REACT on a congested simulated cluster, against the same run without it.

Runs :func:`reactccl.experiments.demo.run_demo` with a progress bar, then shows the pattern
before and after, the swaps REACT made and why (its decision log), and the epoch times and
algbw of both runs after the warm-up. ``--json`` prints the machine-readable result instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..experiments.demo import DemoConfig, DemoResult, demo_scenario, run_demo
from ..experiments.metrics import default_warmup
from ..experiments.patterns_view import moved_positions, pattern_view, tree_parents
from ..packetsim.native import PacketSimError, PacketSimUnavailable
from ..topology import UnitError, parse_topology
from ..topology.graph import MAX_LINKS
from ..topology.units import parse_bytes
from ..trace import format_byte_rate, format_bytes, format_time
from ._common import check_outputs, save_pattern_line
from .bounds import MAX_ECMP_PORTS, MAX_EPOCHS, MAX_EXTERNAL_FLOWS, bound_counts
from .commands import HELP
from .errors import report
from .options import parse_options
from .output import print_table, stdout_console


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``demo`` subcommand."""
    d = DemoConfig()
    p = sub.add_parser("demo", help=HELP["demo"],
                       description="Baseline and REACT on the same seeded congested scenario, side by side.")
    p.add_argument("--topology", default=d.topology,
                   help=f"topology spec (default {d.topology}) [at most {MAX_LINKS} directed links]")
    p.add_argument("--algorithm", default=d.algorithm, help=f"pattern generator (default {d.algorithm})")
    p.add_argument("--option", "-O", action="append", metavar="KEY=VALUE",
                   help="generator option (repeatable); on a topology of servers ring and nccl-tree are NCCL's "
                        "hierarchical patterns (servers from the topology): -O channels=C, -O hierarchy=flat")
    p.add_argument("--ranks", type=int, default=d.ranks, help=f"ranks, on hosts 0..N-1 (default {d.ranks})")
    p.add_argument("--size", default="20MB", help="message size (default 20MB)")
    p.add_argument("--p", type=int, default=d.p,
                   help=f"external flows into the congested rank (default {d.p}) [at most {MAX_EXTERNAL_FLOWS}]")
    p.add_argument("--rank", type=int, default=None,
                   help="congested rank (default: the busiest receiver, an interior tree position)")
    p.add_argument("--epochs", type=int, default=d.epochs, help=f"epochs (default {d.epochs})")
    p.add_argument("--warmup", type=int, default=None,
                   help=f"epochs left out of the metrics (default {d.warmup}, or epochs//4 for runs of "
                        f"{d.warmup} epochs or fewer)")
    p.add_argument("--ecmp-ports", type=int, default=d.ecmp_ports, help=f"ECMP ports per flow (default {d.ecmp_ports})")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of ECMP draws and REACT (default 0)")
    p.add_argument("--engine", choices=["fluid", "packet"], default="fluid",
                   help="fluid: the flow-level max-min simulator (default); packet: ns-3 packet level with "
                        "REACT §7.3's DCTCP (needs pip install 'reactccl[ns3]'; the two arms run one after the "
                        "other, seconds per epoch)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--save-pattern", metavar="FILE",
                   help="write the pattern REACT ended on (verified): MSCCL XML for a .xml name, else JSON")
    p.add_argument("--trace", metavar="FILE.json",
                   help="write both runs' flows as Chrome trace-event JSON for Perfetto (ui.perfetto.dev): a track "
                        "per rank, a slice per flow (bytes, rate), REACT's decisions as instants")
    bound_counts(p, {"--epochs": MAX_EPOCHS, "--warmup": MAX_EPOCHS, "--ecmp-ports": MAX_ECMP_PORTS})
    p.set_defaults(func=run)


#: Most external flows the demo takes: 100,000 ran for ten minutes; the paper uses up to 8.
MAX_P = MAX_EXTERNAL_FLOWS


def fitting_topologies(hosts: int) -> str:
    """The smallest star and fat-tree with at least ``hosts`` hosts, as specs, e.g.
    ``"star:hosts=17 or fat-tree:k=6 (54 hosts)"`` for 17."""
    k = 2
    while k ** 3 // 4 < hosts:
        k += 2
    return f"star:hosts={hosts} or fat-tree:k={k} ({k ** 3 // 4} hosts)"


def check_config(cfg: DemoConfig) -> None:
    """Everything about ``cfg`` that can be wrong, checked before any epoch runs (so errors
    are not printed after empty progress bars).

    Raises:
        ValueError: a flag out of range (named), a topology with too few hosts (with one
            that fits), or whatever :func:`reactccl.experiments.demo.demo_scenario` refuses.
    """
    for flag, value, low in (("--ranks", cfg.ranks, 2), ("--epochs", cfg.epochs, 1), ("--p", cfg.p, 1),
                             ("--ecmp-ports", cfg.ecmp_ports, 1), ("--seed", cfg.seed, 0)):
        if value < low:
            why = " (one rank has nothing to exchange: no flows, no epoch time)" if flag == "--ranks" else ""
            raise ValueError(f"{flag}: expected an integer >= {low}, got {value}{why}")
    if cfg.p > MAX_P:
        raise ValueError(f"--p: at most {MAX_P} external flows (each is simulated on its own; REACT's "
                         f"experiments use up to 8), got {cfg.p}")
    if not 0 <= cfg.warmup < cfg.epochs:
        raise ValueError(f"--warmup: must satisfy 0 <= warmup < epochs ({cfg.epochs}), got {cfg.warmup}")
    topo = parse_topology(cfg.topology)
    need = cfg.ranks + 1
    if topo.num_hosts < need:
        raise ValueError(f"--ranks {cfg.ranks}: the demo needs {need} hosts ({cfg.ranks} ranks and one outside "
                         f"host that sends the external flows) but {topo.name} has {topo.num_hosts}; "
                         f"use e.g. --topology {fitting_topologies(need)}")
    demo_scenario(cfg)


def _config(args: argparse.Namespace) -> DemoConfig:
    if args.warmup is None:
        args.warmup = default_warmup(args.epochs, DemoConfig().warmup)
    return DemoConfig(topology=args.topology, algorithm=args.algorithm, ranks=args.ranks,
                      message_bytes=parse_bytes(args.size, "--size"), p=args.p, rank=args.rank, epochs=args.epochs,
                      warmup=args.warmup, seed=args.seed, ecmp_ports=args.ecmp_ports,
                      options=tuple(parse_options(getattr(args, "option", None)).items()))


def run(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit code (2 on a bad setting)."""
    console = stdout_console()
    try:
        cfg = _config(args)
        check_config(cfg)
        trace = getattr(args, "trace", None)
        check_outputs(save_pattern=getattr(args, "save_pattern", None), trace=trace)
        engine = getattr(args, "engine", "fluid")
        if args.json or args.no_progress:
            res = run_demo(cfg, engine=engine, keep_traces=bool(trace))
        else:
            res = _run_with_progress(cfg, Console(stderr=True), engine, keep_traces=bool(trace))
    except (ValueError, UnitError, KeyError, PacketSimUnavailable, PacketSimError) as exc:
        return report(exc, "error")
    if args.json:
        print(json.dumps(res.to_json(), indent=1))
    else:
        show(res, console)
    return _save_pattern(args, res) or _write_trace(args, res)


def _write_trace(args: argparse.Namespace, res: DemoResult) -> int:
    """``--trace``: both arms' epochs as Chrome trace-event JSON; 2 if it cannot be written."""
    if not getattr(args, "trace", None):
        return 0
    from ..tracefile import TraceRun, write_chrome_trace  # start-up cost
    runs = [TraceRun("baseline", res.traces["baseline"]),
            TraceRun("REACT", res.traces["react"], decisions=list(res.controller.decisions))]
    try:
        n = write_chrome_trace(args.trace, runs, metadata={"command": "reactccl demo",
                                                           "topology": res.scenario.topology})
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        print(f"error: --trace {args.trace}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(f"wrote {args.trace}: {n:,} trace events (open in ui.perfetto.dev)", file=sys.stderr)
    return 0


def _save_pattern(args: argparse.Namespace, res: DemoResult) -> int:
    """``--save-pattern``: REACT's last pattern, verified, to the file; 2 if it cannot be written."""
    if not getattr(args, "save_pattern", None):
        return 0
    try:
        line = save_pattern_line(res.react.current[0], args.save_pattern)
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        print(f"error: --save-pattern {args.save_pattern}: {e.strerror or e}", file=sys.stderr)
        return 2
    print(line, file=sys.stderr)
    return 0


def _run_with_progress(cfg: DemoConfig, console: Console, engine: str = "fluid", keep_traces: bool = False) -> DemoResult:
    bar = Progress(TextColumn("[bold]{task.description:<9}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("epoch {task.fields[t]}"), TimeElapsedColumn(), console=console)
    with bar:
        tb = bar.add_task("baseline", total=cfg.epochs, t="-")
        tr = bar.add_task("REACT", total=cfg.epochs, t="-")

        def tick(e: int, t_base: float, t_react: float) -> None:
            bar.update(tb, advance=1, t=format_time(t_base))
            bar.update(tr, advance=1, t=format_time(t_react))

        return run_demo(cfg, on_epoch=tick, engine=engine, keep_traces=keep_traces)


def _header(res: DemoResult) -> str:
    """The scenario in one line, with the fabric's own host names (``h3``, or ``n3`` on a torus)
    and its link rate/latency; the ECMP ports only where routes are not fixed; on servers the
    pattern's name (its servers, NICs and channels)."""
    cfg, sc = res.config, res.scenario
    topo = parse_topology(sc.topology)
    host = topo.hosts
    rate, lat = np.unique(topo.capacity), np.unique(topo.latency)
    links = (f"{rate[0] / 1e9:g} Gbps, {format_time(float(lat[0]))} links" if len(rate) == 1 and len(lat) == 1
             else "mixed links")
    routes = "fixed routes" if topo.router is not None else f"{cfg.ecmp_ports} ECMP ports"
    algo = cfg.algorithm if topo.servers is None else (res.react.first[0].name or cfg.algorithm)  # with its hierarchy
    return (f"[bold]REACT demo[/bold]: {cfg.ranks}-rank {algo} "
            f"({res.react.first[0].collective.value}), {format_bytes(cfg.message_bytes)} per epoch, "
            f"on {sc.topology} ({links}); ranks on hosts {host[0]}-{host[cfg.ranks - 1]}; "
            f"{cfg.p} external flows {host[cfg.ranks]} -> {host[res.rank]} into rank [bold red]{res.rank}[/]; "
            f"{cfg.epochs} epochs, {routes}, seed {cfg.seed}")


def _patterns(res: DemoResult) -> Table:
    first, last = res.react.first[0], res.react.current[0]
    t = Table(title=f"Pattern before and after REACT (congested rank [bold red]{res.rank}[/] in red; "
                    "parent(children ...) from the reduce flows)", title_justify="left")
    t.add_column("chunk graph")
    t.add_column("before")
    t.add_column("after")
    for (label, before), (_, after) in zip(pattern_view(first, [res.rank]), pattern_view(last, [res.rank])):
        t.add_row(label.split()[-1], before, after)  # the graph's number: 'tree'/'graph' can differ per column
    return t


def _untreed_note(res: DemoResult) -> str | None:
    """One sentence naming the chunk graphs that were trees before REACT and are not after
    (a window swap gave their broadcast other parents than their reduce), or None."""
    first, last = res.react.first[0], res.react.current[0]
    gone = [g for g in sorted(first.chunk_graphs())
            if tree_parents(first, g) is not None and tree_parents(last, g) is None]
    if not gone:
        return None
    which = ("chunk graph " if len(gone) == 1 else "chunk graphs ") + ", ".join(map(str, gone))
    return (f"After REACT's position swaps {which} no longer reduce{'s' if len(gone) == 1 else ''} and "
            f"broadcast{'s' if len(gone) == 1 else ''} along one tree, so the after column shows who sends "
            f"to whom at each step (tN: src>dst, + reduce, = copy).")


def _moves(res: DemoResult) -> str:
    moved = moved_positions(res.react.first[0], res.react.current[0])
    if not moved:
        return "No rank changed position."
    parts = []
    for m in moved:
        ranks = m["ranks"]
        who = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(map(str, ranks))} (by step)"
        parts.append(f"graph {m['graph']} position {m['position']} -> {who}")
    return "Positions (ranks of the original pattern) now held by other ranks: " + "; ".join(parts)


def _fmt_gain(ratio: float | None) -> str:
    """A before/after time ratio (> 1 is faster) as a percent speed-up."""
    return "-" if ratio is None else f"{round((float(ratio) - 1) * 100, 1) + 0.0:+.1f}%"


def _decisions(res: DemoResult) -> list[str]:
    """Lines (rich markup) telling each decision: when, what was detected, which swap and why,
    estimated and measured gain, and whether it was kept."""
    log = res.controller.decisions
    tau = res.controller.params.tau_r
    last = res.config.epochs - 1
    lines = ["[bold]What REACT did and why[/bold] (decision log; ① global, ② chunk-graph, ③ position swap; "
             "gains are epoch-time speed-ups)"]
    if not log:
        lines.append("  no decision: the pattern never changed")
    for i, d in enumerate(log):
        if d.effective_epoch > last:       # decided too late to run: not applied, nothing measured
            lines.append(f"  #{i} after epoch {d.epoch}, for epoch {d.effective_epoch}: {d.kind}, "
                         f"[yellow]never applied[/yellow] (the run ended with epoch {last})")
            lines += ["     " + x for x in _decision_details(d)]
            continue
        head = f"  #{i} after epoch {d.epoch}, runs from epoch {d.effective_epoch}: "
        if d.kind == "revert":
            lines.append(head + f"[yellow]revert #{d.reverts}[/yellow] (trial measured "
                         f"{_fmt_gain(log[d.reverts].measured_gain)}, not better by {tau:.0%})")
            continue
        kept = "[yellow]reverted later[/yellow]" if d.reverted else "[green]kept[/green]"
        lines.append(head + f"{d.kind}, estimated {_fmt_gain(d.estimated_epoch_gain)} (whole pattern; "
                     f"{_fmt_gain(d.estimated_gain)} on the old critical paths), measured "
                     f"{_fmt_gain(d.measured_gain)}, {kept}")
        lines += ["     " + x for x in _decision_details(d)]
    return lines


def _decision_details(d: Any) -> list[str]:
    """What a transform decision saw (congested flows by kind) and did (its swaps)."""
    out = []
    kinds: dict[str, list[str]] = {}
    for f in d.detected:
        kinds.setdefault(f["kind"], []).append(f"{f['src']}>{f['dst']}")
    for k, v in kinds.items():
        out.append(f"detected {len(v)} {k}-congested flows: " + " ".join(v[:8]) + (" ..." if len(v) > 8 else ""))
    for s in d.swaps:
        where = f" in chunk graph {s['graph']}" if s.get("graph") is not None else " in all chunk graphs"
        if s.get("t0") is not None:
            where += f", steps {s['t0']}..{s['t1']}"
        node = s.get("node")
        if node:    # Algorithm 1's swap: made for one congested rank
            why = f"for {node.get('kind', '?')}-congested rank {node.get('rank', '?')}"
        else:       # a local-search move: chosen on the learned link model's epoch estimate
            why = "local search on the learned link model"
        if s.get("lowers_degree"):
            why += ", lowers its degree"
        est = ""
        if s.get("est_before_s") and s.get("est_after_s"):
            est = f"; critical path est. {format_time(s['est_before_s'])} -> {format_time(s['est_after_s'])}"
        elif s.get("est_after_s"):
            est = f"; epoch est. {format_time(s['est_after_s'])} after this move"
        out.append(f"{s.get('symbol', '')} swap ranks {s['a']} <-> {s['b']}{where} ({why}){est}")
    return out


def _rate(bps: float) -> str:
    return format_byte_rate(bps)


def _results(res: DemoResult) -> Table:
    m, g = res.metrics(), res.gains()
    b, r = m["baseline"], m["react"]
    t = Table(title=f"After the warm-up (epochs {res.config.warmup}..{res.config.epochs - 1}), same scenario and seed",
              title_justify="left")
    t.add_column("")
    t.add_column("baseline", justify="right")
    t.add_column("REACT", justify="right")
    t.add_column("REACT vs baseline", justify="right")
    t.add_row("mean epoch time", format_time(b["mean_time"]), format_time(r["mean_time"]), f"{-g['mean_time']:+.1f}%")
    t.add_row("p95 epoch time", format_time(b["p95_time"]), format_time(r["p95_time"]), f"{-g['p95_time']:+.1f}%")
    t.add_row("mean algbw", _rate(b["mean_algbw"]), _rate(r["mean_algbw"]), f"{g['mean_algbw']:+.1f}%")
    t.add_row("algbw of the p95 epoch", _rate(b["p95_algbw"]), _rate(r["p95_algbw"]), f"{g['p95_algbw']:+.1f}%")
    return t


def show(res: DemoResult, console: Console) -> None:
    """Print the demo's result for people."""
    console.print(_header(res))
    print_table(console, _patterns(res))
    note = _untreed_note(res)
    if note:
        console.print(note)
    console.print(_moves(res))
    for line in _decisions(res):
        console.print(line)
    print_table(console, _results(res))
    k = res.react.changes[0]
    engine = "packet level (ns-3, DCTCP)" if res.baseline.engine == "packet" else "flow level (max-min)"
    console.print(f"REACT changed the pattern {k} time{'' if k == 1 else 's'}; both runs took {res.wall_s:.1f} s "
                  f"({engine}).")

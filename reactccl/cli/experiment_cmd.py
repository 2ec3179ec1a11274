"""``reactccl experiment NAME``: reproduce one of REACT's simulation figures (§7.3, C.2, C.3).

Writes ``OUT/NAME.json`` and ``OUT/NAME.png`` (``--out``, default ``results``, or ``results/sp``
for the sp-* experiments, as ``reactccl sp goodput``) and prints the improvement table; ``list``
shows the experiments.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console

from ..experiments import EXPERIMENTS, experiment_table, run_experiment
from ..experiments.sp_figures import DEFAULT_OUT as SP_DEFAULT_OUT
from ..experiments.sp_figures import EXPERIMENTS as SP_EXPERIMENTS
from ..experiments.sp_figures import prepare_out
from ..experiments.sp_figures import run_experiment as run_sp_experiment
from ..suggest import did_you_mean
from .bounds import MAX_EPOCHS, MAX_SCENARIOS, bound_counts, jobs_count
from .commands import HELP
from .errors import progress, report
from .output import print_table, stdout_console


def _param(text: str) -> tuple[str, object]:
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise argparse.ArgumentTypeError(f"--param: expected NAME=VALUE, got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


#: Default ``--out`` of REACT's figures (the sp-* ones go where ``reactccl sp goodput`` writes).
DEFAULT_OUT = "results"


def _out_dir(args: argparse.Namespace) -> str:
    """The folder that gets ``NAME.json`` and ``NAME.png``: ``--out`` as given, else the default."""
    if args.out is not None:
        return args.out
    return SP_DEFAULT_OUT if args.name in SP_EXPERIMENTS else DEFAULT_OUT


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``experiment`` subcommand."""
    every = [*EXPERIMENTS, *SP_EXPERIMENTS]
    names = ", ".join(every)
    p = sub.add_parser("experiment", help=HELP["experiment"],
                       description=f"Reproduce a REACT simulation experiment ({', '.join(EXPERIMENTS)}) or an "
                                   f"SP-allreduce goodput experiment ({', '.join(SP_EXPERIMENTS)}), or 'list'.")
    p.add_argument("name", help=f"experiment name ({names}) or 'list'")
    p.add_argument("--quick", action="store_true", help="reduced sweep: few settings, 2 scenarios of 30 epochs (sp-*: small fabrics, 3 sizes, seconds)")
    p.add_argument("--jobs", "-j", type=jobs_count, default=None,
                   help="worker processes (default: all usable CPUs; more than those are cut to them, with a note)")
    p.add_argument("--out", default=None, help=f"output folder for NAME.json and NAME.png, or NAME-engines.json with "
                                                f"--engine packet (default: {DEFAULT_OUT}; sp-*: {SP_DEFAULT_OUT})")
    p.add_argument("--seed", type=int, default=0, help="base seed of the scenario generator (default 0)")
    p.add_argument("--scenarios", type=int, default=None, help="scenarios per setting (paper: 10; fig6/fig7: 5)")
    p.add_argument("--epochs", type=int, default=None, help="epochs per run (paper: 100)")
    p.add_argument("--warmup", type=int, default=None, help="epochs left out of the metrics (paper: 25)")
    p.add_argument("--param", type=_param, action="append", default=[], metavar="NAME=VALUE",
                   help="a REACT parameter (Table 3 name in reactccl.tuner.ReactParams), repeatable")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the result document (without per-epoch times)")
    p.add_argument("--engine", choices=["fluid", "packet"], default="fluid",
                   help="packet: run a reduced sweep (fig5a/5b/12: x in {1,4}, p in {2,4}; 1 scenario per "
                        "setting, 20 epochs, warm-up 8; override with --scenarios/--epochs/--warmup/--size) on "
                        "both the fluid simulator and ns-3 (REACT §7.3 DCTCP) and print them side by side; "
                        "needs pip install 'reactccl[ns3]'")
    p.add_argument("--cluster", default=None, metavar="auto|ADDRESS",
                   help="run the scenarios as tasks on Dask (pip install 'reactccl[cluster]'): 'auto' starts a "
                        "local cluster, tcp://HOST:8786 uses a running scheduler (dask scheduler / dask worker "
                        "on each machine); default: a local process pool")
    p.add_argument("--size", default=None, help="with --engine packet: message size of every job (default: the "
                                                "experiment's, 20MB)")
    bound_counts(p, {"--scenarios": MAX_SCENARIOS, "--epochs": MAX_EPOCHS, "--warmup": MAX_EPOCHS})
    p.set_defaults(func=run)


def _check_params(params: dict) -> None:
    """ValueError naming the first ``--param`` that is not a REACT parameter or has a bad value
    (checked here, before any scenario runs in a worker)."""
    if not params:
        return
    from ..tuner import ReactParams  # start-up cost
    known = ReactParams.__dataclass_fields__
    for name in params:
        if name not in known:
            raise ValueError(f"--param {name}: not a REACT parameter (known: {', '.join(known)})")
    try:
        ReactParams(**params)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--param: {exc}") from None


def _run_engines(args: argparse.Namespace, console: Console) -> int:
    """``--engine packet``: the reduced sweep on both engines, side by side."""
    from ..experiments.engines import engines_table, run_both_engines  # start-up cost
    from ..packetsim.native import PacketSimError, PacketSimUnavailable
    from ..topology import UnitError, parse_size

    try:
        size = None if args.size is None else parse_size(args.size, "size")
        doc = run_both_engines(args.name, _out_dir(args), args.jobs, dict(args.param), progress=not args.no_progress,
                               console=Console(stderr=True), scenarios=args.scenarios, epochs=args.epochs,
                               warmup=args.warmup, seed=args.seed, size=size, cluster=args.cluster)
    except (ValueError, UnitError, PacketSimUnavailable, PacketSimError) as exc:
        return report(exc, "error")
    if args.json:
        print(json.dumps({k: v for k, v in doc.items() if k != "scenarios"}, indent=1))
        return 0
    print_table(console, engines_table(doc))
    w = doc["wall_s"]
    console.print(f"{doc['config']['scenario_count']} scenarios x 2 arms on each engine: fluid {w['fluid']:.1f} s, "
                  f"packet {w['packet']:.1f} s ({doc['config']['jobs']} workers); wrote {doc['files']['json']}")
    return 0


def _sp_unsupported(args: argparse.Namespace) -> list[str]:
    """The options given that the sp-* experiments do not take (REACT's scenario options)."""
    given = dict(jobs=args.jobs is not None, seed=args.seed != 0, scenarios=args.scenarios is not None,
                 epochs=args.epochs is not None, warmup=args.warmup is not None, param=bool(args.param),
                 json=args.json, engine=getattr(args, "engine", "fluid") != "fluid",
                 size=getattr(args, "size", None) is not None)
    return [f"--{k}" for k, v in given.items() if v]


def run(args: argparse.Namespace) -> int:
    """Run the experiment; returns the exit code (2 on a bad name or setting). The output folder is
    made before the run (a bad ``--out`` fails at once); the folders this made are removed again
    when the command fails and they are still empty, so a refused setting leaves nothing behind."""
    fresh = [] if args.name == "list" else [p for p in (Path(_out_dir(args)), *Path(_out_dir(args)).parents)
                                            if not p.exists()]
    rc = 1
    try:
        rc = _run(args)
        return rc
    finally:
        if rc != 0:
            for folder in fresh:          # deepest first
                try:
                    folder.rmdir()
                except OSError:           # not empty, or not made by this run
                    break


def _run(args: argparse.Namespace) -> int:
    console = stdout_console()
    if args.name == "list":
        for e in EXPERIMENTS.values():
            console.print(f"[bold]{e.name}[/bold]  {e.title}")
        for name in SP_EXPERIMENTS:
            console.print(f"[bold]{name}[/bold]  SP-allreduce goodput (same as `reactccl sp goodput {name}`, "
                          f"which has the per-experiment options)")
        return 0
    if args.name in EXPERIMENTS or args.name in SP_EXPERIMENTS:
        try:  # a bad --out fails now, not after the whole run
            prepare_out(_out_dir(args))
        except ValueError as exc:
            return report(exc, "error")
    if args.name in SP_EXPERIMENTS:
        bad = _sp_unsupported(args)
        if bad:
            return report(f"{args.name}: {', '.join(bad)} {'does' if len(bad) == 1 else 'do'} not apply to the "
                          f"SP-allreduce experiments (deterministic, one run per setting); use --quick/--out/"
                          f"--no-progress here, or `reactccl sp goodput {args.name} --help` for their own options",
                          "error")
        try:
            console.print(run_sp_experiment(args.name, _out_dir(args), quick=args.quick,
                                            log=None if args.no_progress else progress),
                          markup=False, highlight=False)
        except ValueError as exc:
            return report(exc, "error")
        return 0
    if args.name not in EXPERIMENTS:
        every = [*EXPERIMENTS, *SP_EXPERIMENTS, "list"]
        return report(f"unknown experiment {args.name!r}{did_you_mean(args.name, every)}; "
                      f"known: {', '.join(every[:-1])} (or 'list')", "error")
    if getattr(args, "engine", "fluid") == "packet":
        return _run_engines(args, console)
    if getattr(args, "size", None) is not None:
        return report("--size: only used with --engine packet", "error")
    try:
        _check_params(dict(args.param))
        doc = run_experiment(args.name, quick=args.quick, jobs=args.jobs, out=_out_dir(args), seed=args.seed,
                             scenarios=args.scenarios, epochs=args.epochs, warmup=args.warmup,
                             params=dict(args.param), progress=not args.no_progress and not args.json,
                             console=Console(stderr=True), cluster=args.cluster)
    except ValueError as exc:
        return report(exc, "error")
    if args.json:
        slim = {k: v for k, v in doc.items() if k != "scenarios"}
        print(json.dumps(slim, indent=1))
        return 0
    print_table(console, experiment_table(doc))
    console.print(f"notes: {doc['notes']}")
    console.print(f"{doc['config']['scenario_count']} scenarios in {doc['wall_s']:.1f} s "
                  f"({doc['config']['jobs']} workers); wrote {doc['files'].get('json')} and {doc['files'].get('png')}"
                  + (" (replacing the files of an earlier run with the same settings)"
                     if doc["files"].get("replaced") else ""))
    return 0

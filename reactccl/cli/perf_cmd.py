"""``reactccl perf``: an nccl-tests-style sweep (``-b 8 -e 128M -f 2 -n 20 -w 5``) of one or more
algorithms, on the simulator or, under ``torchrun``, on real ranks beside ``dist.all_reduce``.

    reactccl perf -b 8 -e 128M -f 2 -a ring,nccl-tree --ranks 16 --topology fat-tree:k=4
    torchrun --nproc-per-node 4 -m reactccl.cli.main perf -b 1K -e 64M -f 4 -a ring --backend gloo
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import sys

from ..experiments.perf import (DTYPES, REAL_DTYPES, check_dtype, dist_sweep, format_table, nccl_sizes, parse_nccl_size,
                                plot_busbw, sim_sweep)
from ..packetsim.native import INSTALL_HINT
from ..pattern import PatternError
from .bounds import MAX_ECMP_PORTS, MAX_ITERS, bound_counts
from .errors import report
from ._common import check_outputs, deprecated_alias
from .pattern_cmd import parse_options


#: ``perf --engine`` names -> the simulator's engine (fluid is the compiled engine, as in ``simulate``).
ENGINES = {"fluid": "compiled", "compiled": "compiled", "python": "python"}


def _engine(name: str) -> str:
    """The simulator's engine for ``perf --engine NAME``.

    Raises:
        ValueError: ``packet`` (perf has no packet-level runs; ``simulate --engine packet`` has), or
            a name not in :data:`ENGINES`, listing them.
    """
    if name == "packet":
        raise ValueError(f"--engine packet: perf runs on the flow-level simulator only ({', '.join(ENGINES)}); "
                         f"for packet level use `reactccl simulate --engine packet` (needs {INSTALL_HINT})")
    if name not in ENGINES:
        raise ValueError(f"--engine {name}: expected one of {', '.join(ENGINES)}")
    return ENGINES[name]


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``perf``."""
    p = sub.add_parser(
        "perf", help="nccl-tests-style sweep: time, algbw, busbw and #wrong per message size",
        description="Sweep message sizes like nccl-tests (all_reduce_perf): sizes from -b to -e times -f, "
                    "-w warm-up and -n timed iterations each, columns size, count, type, redop, root, time (us), "
                    "algbw, busbw (GB/s), #wrong. On the simulator by default; under torchrun (or with "
                    "--backend) on real ranks, where dist.all_reduce runs beside the patterns and #wrong "
                    "checks every element of the result. Sizes take K/M/G as nccl-tests does (binary).",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("-b", "--minbytes", default="32M", help="smallest size (default 32M, as nccl-tests)")
    p.add_argument("-e", "--maxbytes", default="32M", help="largest size (default 32M)")
    p.add_argument("-f", "--stepfactor", type=float, default=2.0, help="multiply the size by this (default 2)")
    p.add_argument("-i", "--stepbytes", default=None, help="add this many bytes instead of -f")
    p.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup-iters", "--warmup_iters", dest="warmup", type=int, default=5,
                   help="untimed iterations first (default 5)")
    p.add_argument("-d", "--datatype", default="float", choices=sorted(DTYPES),
                   help=f"element type (default float; real ranks: {', '.join(REAL_DTYPES)}); sizes are whole "
                        "elements, so -b must hold one")
    p.add_argument("-o", "--op", default="sum", choices=["sum"],
                   help="reduction (default sum; our patterns and their check are sums)")
    p.add_argument("-c", "--check", type=int, default=1, choices=[0, 1],
                   help="real ranks: check every element of the result (default 1; 0 prints N/A)")
    p.add_argument("-a", "--algorithm", default="ring,nccl-tree",
                   help="comma-separated registered generators (default ring,nccl-tree)")
    p.add_argument("--option", "-O", action="append", metavar="KEY=VALUE", help="generator option (repeatable)")
    p.add_argument("--ranks", type=int, default=8, help="simulator: number of ranks (default 8)")
    p.add_argument("--topology", "-t", default="fat-tree:k=4", help="simulator: topology spec (default fat-tree:k=4)")
    p.add_argument("--engine", default=None,
                   help="simulator engine: fluid (the compiled max-min engine, the default; also 'compiled') "
                        "or python (the reference engine), as `simulate --engine` (no packet level here)")
    p.add_argument("--background", action="append", metavar="SPEC", help="simulator: background traffic (repeatable)")
    p.add_argument("--degrade", action="append", metavar="SPEC", help="simulator: degraded links (repeatable)")
    p.add_argument("--ecmp-ports", dest="ports", type=int, default=4, help="simulator: ECMP ports per flow (default 4)")
    deprecated_alias(p, "--ports", "--ecmp-ports")
    p.add_argument("--seed", type=int, default=0, help="simulator: seed (default 0)")
    p.add_argument("--backend", choices=["gloo", "nccl"], default=None,
                   help="run on real ranks with this torch.distributed backend (default under torchrun: nccl "
                        "with CUDA, else gloo)")
    p.add_argument("--no-dist", action="store_true", help="real ranks: leave dist.all_reduce out")
    p.add_argument("--timeout", type=float, default=60.0, help="real ranks: seconds any wait may take (default 60)")
    p.add_argument("--json", action="store_true", help="print the rows as one JSON document")
    p.add_argument("--plot", metavar="PNG", help="write busbw against size, one line per algorithm")
    bound_counts(p, {"-n": MAX_ITERS, "-w": MAX_ITERS, "--ecmp-ports": MAX_ECMP_PORTS})
    p.set_defaults(func=run)


def _sizes(args) -> list[int]:
    lo, hi = parse_nccl_size(args.minbytes, "-b/--minbytes"), parse_nccl_size(args.maxbytes, "-e/--maxbytes")
    step = parse_nccl_size(args.stepbytes, "-i/--stepbytes") if args.stepbytes is not None else None
    return nccl_sizes(lo, hi, args.stepfactor, step)


def _params(args, sizes) -> str:
    """nccl-tests' parameter line."""
    step = f"{args.stepbytes}(bytes)" if args.stepbytes is not None else f"{args.stepfactor:g}(factor)"
    return (f"# minBytes {sizes[0]} maxBytes {sizes[-1]} step: {step} warmup iters: {args.warmup} "
            f"iters: {args.iters} validation: {int(bool(args.check) and _is_real(args))}")


@contextlib.contextmanager
def _progress(total: int):
    """A progress bar on a terminal's stderr (none when piped); yields ``tick(algorithm, size)``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    err = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=err,
                  transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task("perf", total=total)
        yield lambda algo, size: bar.update(task, advance=1, description=f"{algo} {size} B")


def _check(args) -> None:
    if args.iters < 1:
        raise ValueError(f"-n {args.iters}: need at least one timed iteration")
    if args.warmup < 0:
        raise ValueError(f"-w {args.warmup}: must be >= 0")


def _is_real(args) -> bool:
    return args.backend is not None or "WORLD_SIZE" in os.environ


def run(args) -> int:
    """Run the sweep; exit code 2 on a bad setting, 1 when a real-rank check found wrong elements."""
    real = _is_real(args)
    try:
        _check(args)
        sizes = _sizes(args)
        check_dtype(args.datatype, sizes[0], real=real)   # before any rank starts
        algos = [a.strip() for a in args.algorithm.split(",") if a.strip()]
        if not algos:
            raise ValueError(f"-a {args.algorithm!r}: no algorithm given (e.g. -a ring,nccl-tree)")
        opts = parse_options(args.option)
        if real:
            return _run_real(args, sizes, algos, opts)
        check_outputs(plot=args.plot)
        sim = dict(seed=args.seed, background=args.background or [], degrade=args.degrade or None, ports=args.ports)
        if args.engine is not None:
            from ..netsim import run_simulation
            sim["engine"] = _engine(args.engine)
            if "engine" not in inspect.signature(run_simulation).parameters:
                raise ValueError("--engine: this simulator has a single engine (no choice to make)")
        with _progress(len(algos) * len(sizes)) as tick:
            rows = sim_sweep(algos, args.ranks, sizes, iters=args.iters, warmup=args.warmup, dtype=args.datatype,
                             topology=args.topology, options=opts, progress=tick, **sim)
        header = (f"simulator: {args.ranks} ranks on {args.topology}, seed {args.seed}\n" + _params(args, sizes))
    except (ValueError, PatternError) as e:
        return report(e)
    return _report(args, rows, header)


def _report(args, rows, header) -> int:
    if args.json:
        json.dump({"schema": "reactccl.perf/1", "header": header, "rows": [r.to_dict() for r in rows]}, sys.stdout)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_table(rows, header))
    if args.plot:
        try:
            plot_busbw(rows, args.plot, title=header.split("\n")[0])
        except OSError as e:
            print(f"error: --plot {args.plot}: {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"wrote {args.plot}", file=sys.stderr)
    return 1 if any(r.wrong for r in rows) else 0


def _run_real(args, sizes, algos, opts) -> int:
    import torch
    import torch.distributed as dist
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    own = not dist.is_initialized()
    if own:
        if "WORLD_SIZE" not in os.environ:
            raise ValueError("--backend: real ranks need torchrun (or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set)")
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend)
    try:
        rows = dist_sweep(algos, sizes, iters=args.iters, warmup=args.warmup, dtype=args.datatype, options=opts,
                          include_dist=not args.no_dist, timeout=args.timeout, check=bool(args.check))
        rank, n = dist.get_rank(), dist.get_world_size()
    finally:
        if own:
            dist.destroy_process_group()
    if rank != 0:
        return 1 if any(r.wrong for r in rows) else 0
    import socket
    head = (f"real ranks: {n} ranks, backend {backend}\n" + _params(args, sizes)
            + f"\n#  Rank  0 Pid {os.getpid():6d} on {socket.gethostname()} device "
            + (f"cuda:{torch.cuda.current_device()} {torch.cuda.get_device_name()}" if backend == "nccl" else "cpu"))
    return _report(args, rows, head)

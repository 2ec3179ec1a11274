"""``reactccl perf``: nccl-tests (``all_reduce_perf`` and friends) for our patterns, on the simulator
or, under ``torchrun``, on real ranks beside torch.distributed's own collective.

    reactccl perf -b 8 -e 128M -f 2 -o sum -d float --ranks 16 --topology fat-tree:k=4
    reactccl perf --collective alltoall -b 1K -e 16M -f 4 --ranks 8 --csv
    torchrun --nproc-per-node 4 -m reactccl.cli.main perf -b 1K -e 64M -f 4 --algorithm ring --backend gloo

nccl-tests' flags keep their meanings: -b -e -i -f (sizes), -n -w (iterations), -c (checked runs),
-o (op), -d (type), -r (root), -a (how ranks' times combine), -z (blocking), -J (output file).
Our own settings have long names: --algorithm, --topology, --collective, --ranks.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import sys

from ..experiments.perf import (
    AVERAGE_MODES,
    DEFAULT_ALGORITHMS,
    DTYPES,
    REAL_DTYPES,
    check_dtype,
    collective_of,
    nccl_sizes,
    parse_nccl_size,
    same_collective,
    sim_sweep,
)
from ..experiments.perf_format import format_csv, format_table, perf_document, plot_busbw
from ..packetsim.native import INSTALL_HINT
from ..pattern import Collective, PatternError
from ..suggest import did_you_mean
from ._common import check_outputs, deprecated_alias
from .bounds import MAX_ECMP_PORTS, MAX_ITERS, bound_counts
from .commands import HELP
from .errors import report
from .options import parse_options

#: ``perf --engine`` names -> the simulator's engine (fluid is the compiled engine, as in ``simulate``).
ENGINES = {"fluid": "compiled", "compiled": "compiled", "python": "python"}
#: nccl-tests flags that do not apply, with what to use instead; the value that means what we do anyway
REFUSED = {
    "ngpus": ("-g/--ngpus", "1", "nccl-tests' GPUs per thread do not apply: every rank is its own process "
              "(one GPU each under torchrun --nproc-per-node N); on the simulator give --ranks N"),
    "nthreads": ("-t/--nthreads", "1", "nccl-tests' threads per process do not apply: one rank per process; "
                 "start more ranks with torchrun --nproc-per-node N, or give --ranks N on the simulator"),
    "cudagraph": ("-G/--cudagraph", "0", "CUDA graph launches do not apply: our collectives are posted from "
                  "Python on every call; use -n for more timed iterations"),
}
OPS = ("sum", "prod", "min", "max", "avg", "mulsum", "all")


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
        "perf", help=HELP["perf"],
        description="Sweep message sizes like nccl-tests (all_reduce_perf, all_gather_perf, ...): sizes from -b "
                    "to -e times -f (or plus -i), -w warm-up and -n timed iterations each, out of place then in "
                    "place; columns size, count, type, redop, root, then time (us), algbw, busbw (GB/s), #wrong "
                    "for each. On the simulator by default; under torchrun (or with --backend) on real ranks, "
                    "where torch.distributed's own collective runs beside the patterns and #wrong checks every "
                    "element. Sizes take K/M/G as nccl-tests does (binary).",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    g = p.add_argument_group("nccl-tests flags (same meanings)")
    g.add_argument("-b", "--minbytes", default="32M", help="smallest size (default 32M)")
    g.add_argument("-e", "--maxbytes", default="32M", help="largest size (default 32M)")
    g.add_argument("-i", "--stepbytes", default="1M", help="add this many bytes per size (default 1M; -f wins)")
    g.add_argument("-f", "--stepfactor", type=float, default=None, help="multiply the size by this (default: off)")
    g.add_argument("-n", "--iters", type=int, default=20, help="timed iterations per size (default 20)")
    g.add_argument("-w", "--warmup_iters", "--warmup-iters", dest="warmup", type=int, default=1,
                   help="untimed iterations first (default 1, as nccl-tests 2.19)")
    g.add_argument("-c", "--check", type=int, default=1,
                   help="real ranks: checked runs per size, stopping at the first wrong one (default 1; 0: no "
                        "check, #wrong N/A)")
    g.add_argument("-o", "--op", default="sum", help="reduction (default sum; our patterns' reduce adds, so sum only)")
    g.add_argument("-d", "--datatype", default="float", choices=sorted(DTYPES),
                   help=f"element type (default float; real ranks: {', '.join(REAL_DTYPES)})")
    g.add_argument("-r", "--root", type=int, default=0, help="root of broadcast and reduce (default 0)")
    g.add_argument("-a", "--average", default="1",
                   help="ranks' times reported as 0 rank 0's, 1 the mean (default), 2 the least, 3 the most")
    g.add_argument("-z", "--blocking", type=int, default=0, choices=[0, 1, 2, 3],
                   help="real ranks: 0 back to back (default), 1 wait and barrier after each iteration, 2 wait "
                        "after each, 3 wait and barrier after each, barrier not timed (the simulator runs as 3)")
    g.add_argument("-J", "--output_file", "--output-file", dest="output_file", metavar="FILE",
                   help="also write the rows to FILE: .json (schema reactccl.perf/2) or .csv")
    for key, (flags, _, _) in REFUSED.items():
        short, long_ = flags.split("/")
        g.add_argument(short, long_, dest=key, default=None, help=argparse.SUPPRESS)
    o = p.add_argument_group("reactccl settings")
    o.add_argument("--collective", default=None,
                   help="all_reduce (default), all_gather, reduce_scatter, broadcast, reduce or alltoall; "
                        "default: the --algorithm's")
    o.add_argument("--algorithm", default=None,
                   help="comma-separated registered generators of one collective (default all_reduce: "
                        "ring,nccl-tree; alltoall: alltoall-pairwise,alltoall-bruck; ...)")
    o.add_argument("--option", "-O", action="append", metavar="KEY=VALUE", help="generator option (repeatable)")
    o.add_argument("--ranks", type=int, default=8, help="simulator: number of ranks (default 8)")
    o.add_argument("--topology", default="fat-tree:k=4", help="simulator: topology spec (default fat-tree:k=4)")
    o.add_argument("--engine", default=None,
                   help="simulator engine: fluid (the compiled max-min engine, the default; also 'compiled') "
                        "or python (the reference engine), as `simulate --engine` (no packet level here)")
    o.add_argument("--background", action="append", metavar="SPEC", help="simulator: background traffic (repeatable)")
    o.add_argument("--degrade", action="append", metavar="SPEC", help="simulator: degraded links (repeatable)")
    o.add_argument("--ecmp-ports", dest="ports", type=int, default=4, help="simulator: ECMP ports per flow (default 4)")
    deprecated_alias(p, "--ports", "--ecmp-ports")
    o.add_argument("--seed", type=int, default=0, help="simulator: seed (default 0)")
    o.add_argument("--backend", choices=["gloo", "nccl"], default=None,
                   help="run on real ranks with this torch.distributed backend (default under torchrun: nccl "
                        "with CUDA, else gloo)")
    o.add_argument("--no-dist", action="store_true", help="real ranks: leave torch.distributed's collective out")
    o.add_argument("--timeout", type=float, default=60.0, help="real ranks: seconds any wait may take (default 60)")
    o.add_argument("--json", action="store_true", help="print the rows as one JSON document (reactccl.perf/2)")
    o.add_argument("--csv", action="store_true", help="print the rows as CSV (times in us, bandwidths in GB/s)")
    o.add_argument("--plot", metavar="PNG", help="write out-of-place busbw against size, one line per algorithm")
    o.add_argument("--trace", metavar="FILE.json",
                   help="real ranks: write every call of our patterns as Chrome trace-event JSON for Perfetto "
                        "(rank 0 writes it after the sweep): a track per rank, a slice per flow (bytes, rate)")
    bound_counts(p, {"-n": MAX_ITERS, "-w": MAX_ITERS, "--ecmp-ports": MAX_ECMP_PORTS})
    p.set_defaults(func=run)


def _refuse_nccl_only(args) -> None:
    """Refuse -g, -t and -G (except the values that mean what we do anyway), and an algorithm
    name given to -a, each with what to use instead.

    Raises:
        ValueError: naming the flag.
    """
    for key, (flags, fine, why) in REFUSED.items():
        value = getattr(args, key)
        if value is None or value.strip() == fine:
            continue
        hint = ""
        if key == "nthreads" and not value.strip().isdigit():
            hint = f"; -t no longer names the topology: use --topology {value}"
        raise ValueError(f"{flags} {value}: {why}{hint}")
    if args.average.strip() not in ("0", "1", "2", "3"):
        hint = (f"; -a no longer names the algorithm: use --algorithm {args.average}"
                if not args.average.strip().lstrip("-").isdigit() else "")
        raise ValueError(f"-a/--average {args.average}: nccl-tests' average mode, 0 (rank 0), 1 (mean), 2 (min) or "
                         f"3 (max){hint}")


def _plan(args) -> tuple[list[str], Collective]:
    """The algorithms and their collective from --collective / --algorithm.

    Raises:
        ValueError: an unknown collective, no algorithm, or algorithms of another collective.
    """
    coll = collective_of(args.collective) if args.collective is not None else None
    if args.algorithm is None:
        return list(DEFAULT_ALGORITHMS[coll or Collective.ALLREDUCE]), coll or Collective.ALLREDUCE
    algos = [a.strip() for a in args.algorithm.split(",") if a.strip()]
    if not algos:
        raise ValueError(f"--algorithm {args.algorithm!r}: no algorithm given (e.g. --algorithm ring,nccl-tree)")
    got = same_collective(algos)
    if coll is not None and got is not coll:
        raise ValueError(f"--algorithm {args.algorithm}: computes {got.value}, not --collective {args.collective}")
    return algos, got


def _check(args, coll) -> None:
    _refuse_nccl_only(args)
    if args.iters < 1:
        raise ValueError(f"-n {args.iters}: need at least one timed iteration")
    if args.warmup < 0:
        raise ValueError(f"-w {args.warmup}: must be >= 0")
    if args.check < 0:
        raise ValueError(f"-c {args.check}: checked runs must be >= 0")
    op = args.op.strip().lower()
    if op not in OPS:
        raise ValueError(f"-o {args.op}{did_you_mean(op, OPS)}: expected one of {', '.join(OPS)} (nccl-tests' names)")
    if op != "sum":
        raise ValueError(f"-o {args.op}: our patterns reduce by adding (the IR's reduce flow is a sum); only -o sum "
                         f"runs")
    if coll.needs_root and args.root < 0:
        raise ValueError(f"-r {args.root}: the root must be a rank >= 0")


def _sizes(args) -> list[int]:
    lo, hi = parse_nccl_size(args.minbytes, "-b/--minbytes"), parse_nccl_size(args.maxbytes, "-e/--maxbytes")
    step = parse_nccl_size(args.stepbytes, "-i/--stepbytes")
    return nccl_sizes(lo, hi, args.stepfactor, step)


def _params(args, validation: int) -> str:
    """nccl-tests' parameter line."""
    factor = args.stepfactor is not None and args.stepfactor > 1
    step = f"{args.stepfactor:g}(factor)" if factor else f"{parse_nccl_size(args.stepbytes)}(bytes)"
    lo, hi = parse_nccl_size(args.minbytes), parse_nccl_size(args.maxbytes)     # as given, as nccl-tests prints them
    return (f"nThread 1 nGpus 1 minBytes {lo} maxBytes {hi} step: {step} warmup iters: {args.warmup} "
            f"iters: {args.iters} agg iters: 1 validation: {validation} graph: 0")


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


def _is_real(args) -> bool:
    return args.backend is not None or "WORLD_SIZE" in os.environ


def run(args) -> int:
    """Run the sweep; exit code 2 on a bad setting, 1 when a real-rank check found wrong elements."""
    real = _is_real(args)
    try:
        algos, coll = _plan(args)
        _check(args, coll)
        sizes = _sizes(args)
        check_dtype(args.datatype, sizes[0], real=real)   # before any rank starts
        opts = parse_options(args.option)
        check_outputs(plot=args.plot, output_file=args.output_file, trace=args.trace)
        if args.trace and not real:
            raise ValueError("--trace: perf writes flow traces on real ranks (under torchrun); on the simulator "
                             "use `reactccl simulate --trace FILE.json`, which traces every epoch")
        if args.output_file and not args.output_file.lower().endswith((".json", ".csv")):
            raise ValueError(f"-J/--output_file {args.output_file}: the name must end in .json or .csv")
        if real:
            return _run_real(args, sizes, algos, coll, opts)
        sim = dict(seed=args.seed, background=args.background or [], degrade=args.degrade or None, ports=args.ports)
        if args.engine is not None:
            from ..netsim import run_simulation
            sim["engine"] = _engine(args.engine)
            if "engine" not in inspect.signature(run_simulation).parameters:
                raise ValueError("--engine: this simulator has a single engine (no choice to make)")
        if coll.needs_root and args.root >= args.ranks:
            raise ValueError(f"-r {args.root}: not a rank of --ranks {args.ranks}")
        from ..topology import parse_topology  # start-up cost
        topo = parse_topology(args.topology)
        with _progress(len(algos) * len(sizes)) as tick:
            rows = sim_sweep(algos, args.ranks, sizes, iters=args.iters, warmup=args.warmup, dtype=args.datatype,
                             topology=topo, options=opts, progress=tick, root=args.root,
                             average=int(args.average), **sim)
        header = "\n".join([
            f"{_name(coll)}_perf (reactccl perf): simulator, {args.ranks} ranks on {args.topology}, seed {args.seed}",
            _params(args, 0),
            f"time: -a {args.average}, {AVERAGE_MODES[int(args.average)]} of each rank's end of its last flow; an "
            f"iteration is one epoch run alone (as -z 3), so out of place and in place run the same flows",
            "#wrong: N/A, the simulator moves no data; every pattern is verified exactly before it runs"]
            + ([f"generator options: {' '.join(f'{k}={v}' for k, v in opts.items())}"] if opts else [])
            + _hierarchy(algos, args.ranks, topo, opts, args.seed))
    except (ValueError, PatternError) as e:
        return report(e)
    return _report(args, rows, header)


def _hierarchy(algos: list[str], ranks: int, topo, opts: dict, seed: int) -> list[str]:
    """The header's line on NCCL's hierarchy (on a topology of servers, or with server options
    given): what ``ring``/``nccl-tree`` build, with their channels; none otherwise."""
    from ..algorithms.server_options import hierarchy_note, server_options
    if topo.servers is None and not {"servers", "gpus", "nics", "channels", "hierarchy"} & set(opts):
        return []
    notes = [hierarchy_note(a, ranks, server_options(a, ranks, topo, opts, seed=seed)) for a in algos]
    if not any(notes):
        return []
    where = f"servers of {topo.name}" if topo.servers is not None else "servers from -O"
    return [f"hierarchy ({where}; -O hierarchy=flat: the flat pattern, -O channels=C: C channels): "
            + "; ".join(n for n in notes if n)]


def _name(coll) -> str:
    from ..experiments.perf import nccl_name
    return nccl_name(coll)


def _report(args, rows, header) -> int:
    if args.json:
        json.dump(perf_document(rows, header), sys.stdout)
        sys.stdout.write("\n")
    elif args.csv:
        sys.stdout.write(format_csv(rows))
    else:
        sys.stdout.write(format_table(rows, header))
    try:
        if args.output_file:
            with open(args.output_file, "w", encoding="utf-8") as f:
                if args.output_file.lower().endswith(".json"):
                    json.dump(perf_document(rows, header), f)
                else:
                    f.write(format_csv(rows))
            print(f"wrote {args.output_file}", file=sys.stderr)
        if args.plot:
            plot_busbw(rows, args.plot, title=header.split("\n")[0])
            print(f"wrote {args.plot}", file=sys.stderr)
    except OSError as e:
        print(f"error: {e.filename}: {e.strerror or e}", file=sys.stderr)
        return 2
    return 1 if any(r.wrong or r.oop_wrong for r in rows) else 0


def _run_real(args, sizes, algos, coll, opts) -> int:
    import torch
    import torch.distributed as dist

    from ..experiments.perf_real import dist_sweep
    backend = args.backend or ("nccl" if torch.cuda.is_available() else "gloo")
    own = not dist.is_initialized()
    if own:
        if "WORLD_SIZE" not in os.environ:
            raise ValueError("--backend: real ranks need torchrun (or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set)")
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        dist.init_process_group(backend)
    try:
        n = dist.get_world_size()
        if coll.needs_root and args.root >= n:
            raise ValueError(f"-r {args.root}: not a rank of the {n} ranks")
        rows = dist_sweep(algos, sizes, iters=args.iters, warmup=args.warmup, dtype=args.datatype, options=opts,
                          include_dist=not args.no_dist, timeout=args.timeout, check=args.check, root=args.root,
                          blocking=args.blocking, average=int(args.average), trace_to=args.trace)
        rank = dist.get_rank()
    finally:
        if own:
            dist.destroy_process_group()
    if rank != 0:
        return 1 if any(r.wrong or r.oop_wrong for r in rows) else 0
    import socket
    blocking = {0: "", 1: "; -z 1: wait and barrier after each iteration", 2: "; -z 2: wait after each iteration",
                3: "; -z 3: wait and barrier after each iteration, barrier not timed"}[args.blocking]
    head = "\n".join([
        f"{_name(coll)}_perf (reactccl perf): real ranks, {n} ranks, backend {backend}",
        _params(args, int(args.check > 0)),
        f"time: -a {args.average}, {AVERAGE_MODES[int(args.average)]} of each rank's mean time per iteration"
        + blocking,
        f" Rank  0 Pid {os.getpid():6d} on {socket.gethostname()} device "
        + (f"cuda:{torch.cuda.current_device()} {torch.cuda.get_device_name()}" if backend == "nccl" else "cpu")]
        + ([f"generator options: {' '.join(f'{k}={v}' for k, v in opts.items())}"] if opts else []))
    return _report(args, rows, head)

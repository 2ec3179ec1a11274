"""RCollective against ``dist.all_reduce`` on the same process group, side by side in one run.

    .venv/bin/python bench/bench_runtime.py                      # 4 Gloo ranks, 4 B .. 16 MB float32
    .venv/bin/python bench/bench_runtime.py --rounds 3 --ablations   # what each executor choice buys
    .venv/bin/python bench/bench_runtime.py --before ad2fba4          # and the executor of that revision
    bash bench/bench_runtime_nccl.sh                             # the same table on NCCL (2+ GPUs)

Every rep times each method once, in an order shuffled per rep (the same on every rank,
``bench/_stats.rep_order``: drift and other jobs' load hit all methods alike, and no method always
follows the same one; a rotating order gave two identical executors 1.16x and 1.11x). Each
time is: barrier, call, the slowest rank's time (``all_reduce(MAX)`` of each rank's
time; on CUDA after ``torch.cuda.synchronize()``), and the CPU time all ranks spent on it
(``time.process_time``, every thread of the process; it measures a method's own work whatever
the machine's load). A round is ``--reps`` such reps. The table prints each method's median time
over all reps and its ratio to ``dist.all_reduce`` as ``median [95% CI]``: the ratio is taken per
rep (the method and ``all_reduce`` ran in the same rep, one after the other, so load that moves
both cancels), and the interval is the distribution-free one of the median of those ratios
(``bench/_stats.py``). Below the table each of the issue's Gloo targets (ring <= 1.1x from 64 KB
to 16 MB, nccl-tree <= 1.25x, <= 1.5x at 4 B) is judged on that interval: ``met`` (all of it at or
under the target), ``missed`` (all of it over) or ``inside noise`` (more ``--rounds`` narrow it).

Methods: ``all_reduce``; one RCollective per ``--algorithms`` entry with the default options;
with ``--ablations``, ring variants with one choice changed each (``+pipe1M``/``+pipe2M``/``+pipe4M``:
pipeline parts of about 1, 2 or 4 MB, which are off by default; 2 MB cuts a 4-rank ring's 4 MB
chunk in two, as Gloo's own ring does at least (gloo/allreduce.cc: two or more segments per chunk); ``-stage``: every send and
receive staged; ``-inplace``: copies not received in place;
``-direct``: receives and sends waited for by pool threads, not the calling thread;
``direct<=1M``: the calling thread only up to 1 MiB, the cap before unstaged direct sends)
and ``before`` (no staging decisions, no in-place receives, no direct mode: the executor's
choices as they were before them, on today's driver; ``--before REV`` times the old code
itself: the whole ``reactccl`` package of that revision, exported beside today's). On NCCL RCollective runs step by step (one ``batch_isend_irecv`` group per step),
which has neither pipeline parts nor the direct mode, so only ``-stage``, ``-inplace`` and
``before`` are shown there.

On the shared 2-core development machine 4 Gloo processes are oversubscribed and other jobs
run: single figures move by 2x between runs, ratios measured in one run move less. Read the
spread, and rerun on a quiet machine for figures to quote.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from _old import export_old, load_old
from _stats import format_ci, median_ci, paired_ratios, rep_order, verdict
from reactccl.algorithms import generate
from reactccl.runtime import RCollective
from reactccl.runtime.local import run_local
from reactccl.trace import format_bytes, format_time

ABLATIONS = {"+pipe1M": dict(pipeline_bytes=1 << 20), "+pipe2M": dict(pipeline_bytes=2 << 20),
             "+pipe4M": dict(pipeline_bytes=4 << 20),
             "-stage": dict(staging="always"), "-inplace": dict(in_place=False), "-direct": dict(direct_bytes=0),
             "direct<=1M": dict(direct_bytes=1 << 20),
             "before": dict(pipeline_bytes=None, staging="always", in_place=False, direct_bytes=0)}


def _methods(algorithms: list[str], ablations: bool, options: dict, cuda: bool) -> dict:
    out = {}
    for a in algorithms:
        out[a] = (a, options)
    if ablations:
        for name, kw in ABLATIONS.items():
            if cuda and name[1:5] in ("pipe", "dire"):   # the step-by-step NCCL executor has neither
                continue
            out[f"ring{name}"] = ("ring", {**options, **kw})
    return out


def _child(rank: int, world: int, sizes: list[int], algorithms: list[str], reps: int, rounds: int,
           ablations: bool, options: dict, old: tuple | None = None) -> dict:
    cuda = dist.get_backend() == "nccl"
    dev = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    rcs = {}
    if old is not None:
        OldRC, old_generate = load_old(old[1], "runtime.RCollective", "algorithms.generate")
        for a in algorithms:
            rcs[f"{a}@{old[0]}"] = OldRC(old_generate(a, world), timeout=120)
    rcs.update({name: RCollective(generate(a, world), timeout=120, **kw)
                for name, (a, kw) in _methods(algorithms, ablations, options, cuda).items()})
    res = {}
    for numel in sizes:
        x = torch.randn(numel, device=dev)
        fns = {"all_reduce": lambda: dist.all_reduce(x)}
        for name, rc in rcs.items():
            rc(x)  # warm-up: agreement check, schedule and buffers
            fns[name] = (lambda rc=rc: rc(x))
        dist.all_reduce(x)
        names = list(fns)
        per_round = {k: [] for k in names}
        cpu = {k: [] for k in names}
        for rnd in range(rounds):
            times = {k: [] for k in names}
            for rep in range(reps):
                for k in rep_order(names, rnd, rep):
                    sync()
                    dist.barrier()
                    c, t = time.process_time(), time.perf_counter()
                    fns[k]()
                    sync()
                    mine = torch.tensor([time.perf_counter() - t, time.process_time() - c], dtype=torch.float64,
                                        device=dev)
                    every = [torch.empty_like(mine) for _ in range(world)]
                    dist.all_gather(every, mine)
                    every = torch.stack(every).cpu()
                    times[k].append(float(every[:, 0].max()))
                    cpu[k].append(float(every[:, 1].sum()))
            for k in names:
                per_round[k].append(times[k])
        res[numel] = (per_round, {k: statistics.median(v) for k, v in cpu.items()})
    return res


#: the issue's Gloo targets: (algorithm, smallest size in bytes, largest, ratio to all_reduce)
TARGETS = [("ring", 16 << 10, 16 << 20, 1.1), ("nccl-tree", 16 << 10, 16 << 20, 1.25),
           ("ring", 1, 4, 1.5), ("nccl-tree", 1, 4, 1.5)]


def _targets(cis: dict, esize: int) -> list[str]:
    """One line per (target, size) the run measured: the paired CI and its verdict."""
    out = []
    for algo, lo_b, hi_b, target in TARGETS:
        for (name, numel), ci in cis.items():
            if name == algo and lo_b <= numel * esize <= hi_b:
                out.append(f"  {algo:>9} {format_bytes(numel * esize):>7}: {format_ci(*ci)} vs <= {target:.2f}x: "
                           f"{verdict(ci[1], ci[2], target)}")
    return out


def _table(res: dict, esize: int, ranks: int, reps: int, rounds: int, backend: str) -> str:
    first = next(iter(res.values()))[0]
    names = list(first)
    lines = [f"AllReduce on {ranks} {backend} ranks, float32, {rounds} round(s) x {reps} reps, slowest rank; "
             "ratio = method / all_reduce per rep, median [95% CI]"]
    head = f"{'size':>9} {'all_reduce':>10}" + "".join(f" | {k:>10} {'ratio':>17}" for k in names[1:])
    lines.append(head)
    cis = {}
    for numel, (per_round, _) in res.items():
        med = {k: statistics.median(t for r in v for t in r) for k, v in per_round.items()}
        row = f"{format_bytes(numel * esize):>9} {format_time(med['all_reduce']):>10}"
        for k in names[1:]:
            ci = cis[k, numel] = median_ci(paired_ratios(per_round[k], per_round["all_reduce"]))
            row += f" | {format_time(med[k]):>10} {format_ci(*ci):>17}"
        lines.append(row)
    judged = _targets(cis, esize)
    if judged:
        lines.append(f"targets (issue 13, set for Gloo; {backend} here), judged on the 95% CI:")
        lines.extend(judged)
    lines.append("CPU time per call, all ranks together (process CPU of every thread, median; less moved by "
                 "other jobs than wall time):")
    lines.append(f"{'size':>9}" + "".join(f" {k:>12}" for k in names))
    for numel, (_, cpu) in res.items():
        lines.append(f"{format_bytes(numel * esize):>9}" + "".join(f" {format_time(cpu[k]):>12}" for k in names))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="RCollective vs dist.all_reduce on one process group")
    ap.add_argument("--ranks", type=int, default=4, help="processes (NCCL: at most one per GPU is best)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 16384, 262144, 4194304],
                    help="float32 elements per message (default 4 B, 64 KB, 1 MB, 16 MB)")
    ap.add_argument("--algorithms", nargs="+", default=["ring", "nccl-tree"])
    ap.add_argument("--reps", type=int, default=9, help="timed calls per method per round")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of --reps reps (default 3; the ratios' CI is over all reps: more rounds narrow it)")
    ap.add_argument("--ablations", action="store_true", help="also ring with each executor choice turned off")
    ap.add_argument("--pipeline-bytes", type=int, default=0,
                    help="RCollective pipeline part size in bytes; 0 = off (default)")
    ap.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    ap.add_argument("--before", metavar="REV", help="also time RCollective as it was at git revision REV "
                    "(the whole reactccl package of that revision, e.g. ad2fba4: before pipelining), side by side")
    args = ap.parse_args(argv)
    old = None
    if args.before:
        import tempfile
        tmp = tempfile.TemporaryDirectory(prefix="bench_runtime_")
        try:
            old = (args.before, export_old(args.before, tmp.name))
        except (RuntimeError, OSError) as e:
            print(f"bench_runtime: --before {args.before}: {e}", file=sys.stderr)
            return 2
    if args.backend == "nccl":
        if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
            print("bench_runtime: --backend nccl needs 2 or more CUDA GPUs", file=sys.stderr)
            return 2
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")  # a hung group fails, not hangs
    options = {"pipeline_bytes": args.pipeline_bytes or None}
    res = run_local(_child, args.ranks, args.sizes, args.algorithms, args.reps, args.rounds, args.ablations,
                    options, old, timeout=3600, pg_timeout=300, backend=args.backend)[0]
    print(_table(res, 4, args.ranks, args.reps, args.rounds, args.backend))
    return 0


if __name__ == "__main__":
    sys.exit(main())

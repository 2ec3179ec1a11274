"""RCollective against ``dist.all_reduce`` on the same Gloo group (localhost processes).

    .venv/bin/python bench/bench_runtime.py                  # 4 ranks, 4 KB .. 16 MB float32
    .venv/bin/python bench/bench_runtime.py --ranks 3 --reps 5 --algorithms ring nccl-tree

For each message size it prints the median time per AllReduce (the slowest
rank's time, after a barrier) of ``dist.all_reduce`` and of RCollective
running each pattern, and the ratio RCollective / all_reduce.

Measured on the shared 2-core development machine (4 processes with other
jobs running; two runs): 1.2-6x at 4 B, 0.95-3x from 4 KB to 1 MB, 1.0-1.9x
at 16 MB. Runs differ as much as the gap itself there: read the ratios as an
order of magnitude, and rerun on a quiet machine for figures.
Where the gap comes from:

* Fixed cost per call: RCollective is a Python driver. Every flow is one
  ``isend``/``irecv`` (a Python call into c10d), one hand-off to a waiter
  thread (a Gloo request only completes when someone waits on it) and one
  queue event back, and each step of the pattern is a separate round trip
  on the wire; Gloo's all_reduce runs its whole algorithm in C++ on one call.
  This dominates small messages (the 4 B .. 64 KB rows).
* Per byte: each flow is staged (a copy of the pre-step chunk into a send
  buffer, so a rank can send chunk c while it receives into c) and received
  into its own buffer, then added or copied into the tensor: about two extra
  memory passes per flow, where Gloo's ring reduces into place.
* Pipelining: Gloo's ring splits the message into small pieces and overlaps
  the reduce of one with the transfer of the next; a pattern with N chunks
  moves whole chunks, so a rank waits for a chunk before it adds and
  forwards it (``nccl-tree --slices`` pipelines more, at more fixed cost).
  At 16 MB the transfers over loopback TCP dominate both, and the gap closes.

REACT (§7.2, C.1) reports the same effect on GPUs: "RCollective performs worse
than NCCL in most cases due to the overheads of p2p communicators".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.distributed as dist

from reactccl.algorithms import generate
from reactccl.runtime import RCollective
from reactccl.runtime.local import run_local
from reactccl.trace import format_bytes, format_time


def _timed(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        dist.barrier()
        t = time.perf_counter()
        fn()
        dt = torch.tensor([time.perf_counter() - t], dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        times.append(float(dt))
    return statistics.median(times)


def _child(rank: int, world: int, sizes: list[int], algorithms: list[str], reps: int) -> list[dict]:
    rcs = {a: RCollective(generate(a, world), timeout=120) for a in algorithms}
    rows = []
    for numel in sizes:
        x = torch.randn(numel)
        row = {"bytes": numel * 4, "all_reduce": _timed(lambda: dist.all_reduce(x), reps)}
        for a, rc in rcs.items():
            rc(x)  # warm-up: agreement check, plan and buffers
            row[a] = _timed(lambda rc=rc: rc(x), reps)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="RCollective vs dist.all_reduce on one Gloo group")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 1024, 16384, 262144, 4194304],
                    help="float32 elements per message")
    ap.add_argument("--algorithms", nargs="+", default=["ring", "nccl-tree"])
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args(argv)
    rows = run_local(_child, args.ranks, args.sizes, args.algorithms, args.reps, timeout=1200, pg_timeout=300)[0]
    head = f"{'size':>10} {'all_reduce':>12}" + "".join(f" {a:>12} {'ratio':>6}" for a in args.algorithms)
    print(f"AllReduce on {args.ranks} Gloo processes (localhost), median of {args.reps}, slowest rank")
    print(head)
    for r in rows:
        line = f"{format_bytes(r['bytes']):>10} {format_time(r['all_reduce']):>12}"
        for a in args.algorithms:
            line += f" {format_time(r[a]):>12} {r[a] / r['all_reduce']:>5.2f}x"
        print(line)
    print("ratio = RCollective / dist.all_reduce. Small messages: Python driver and one thread hand-off per "
          "flow;\nlarge messages: staging copies and no pipelining inside a chunk (see this script's docstring).")
    return 0


if __name__ == "__main__":
    sys.exit(main())

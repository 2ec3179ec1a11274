"""Time to generate and exactly verify large patterns (issue 2: 1024-rank ring in < 5 s), and
verify's time on the shapes that were quadratic (issue 11): 100k identical reduces in one
step, a valid 100k-step pattern, each next to one 10x smaller (near-linear: ratio ~10); and the
compiled accept path (verify_fast, up to 64 ranks) beside the numpy reference (``compiled=False``)
on the small patterns the tuner verifies, and the compiled dependency lists (``pattern/deps.py``,
which the tuner builds for every candidate it scores) beside their numpy reference, in one run.

Usage: python bench/bench_verify.py [--ranks 1024] [--repeat 1] [--long 100000]
Prints, per algorithm, flows, (flow, chunk) pairs, generation and verification seconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from reactccl.algorithms import generate
from reactccl.pattern import CollectivePattern, PatternError, verify
from reactccl.pattern.deps import dependencies_csr, dependencies_numpy

CASES = [("ring", {}), ("nccl-tree", {}), ("recursive-doubling", {})]


def same_step(f: int) -> CollectivePattern:
    """``f`` identical reduces 0 -> 1 in step 0 (a Reduce to rank 1; rejected: double count)."""
    z = np.zeros(f, np.int64)
    return CollectivePattern.from_arrays("reduce", 2, [1.0], [0], z, z, z + 1, z.astype(np.int8),
                                         np.arange(f + 1), z, root=1, name="same-step")


def long_chain(t: int) -> CollectivePattern:
    """A valid 2-rank AllReduce in ``t`` steps: one reduce, then copies back and forth."""
    src = np.arange(t) % 2
    op = np.ones(t, np.int8)
    op[0] = 0
    return CollectivePattern.from_arrays("allreduce", 2, [1.0], [0], np.arange(t), src, 1 - src, op,
                                         np.arange(t + 1), np.zeros(t, np.int64), name="long-chain")


def _time_verify(p: CollectivePattern, repeat: int, compiled: bool = True) -> tuple[float, str]:
    best, what = float("inf"), ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        try:
            verify(p, compiled=compiled)
            what = "ok"
        except PatternError:
            what = "rejected"
        best = min(best, time.perf_counter() - t0)
    return best, what


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=1, help="runs per case; the best is shown")
    ap.add_argument("--long", type=int, default=100_000, help="flows of the same-step / steps of the chain case")
    args = ap.parse_args()
    print(f"{'algorithm':<22}{'ranks':>6}{'flows':>10}{'pairs':>11}{'generate s':>12}{'verify s':>10}{'total s':>9}")
    for name, opts in CASES:
        best = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            p = generate(name, args.ranks, check=False, **opts)
            t1 = time.perf_counter()
            verify(p)
            t2 = time.perf_counter()
            if best is None or t2 - t0 < best[1] + best[2]:
                best = (p, t1 - t0, t2 - t1)
        p, tg, tv = best
        print(f"{name:<22}{args.ranks:>6}{p.num_flows:>10}{len(p.chunk_idx):>11}{tg:>12.3f}{tv:>10.3f}{tg + tv:>9.3f}")
    verify(generate("nccl-tree", 8))                  # numba: compile or load the accept path's cache first
    print(f"\n{'case':<14}{'flows':>9}{'steps':>9}{'verify s':>10}  {'x10 smaller s':>14}{'ratio':>7}  result")
    for make in (same_step, long_chain):
        big, small = make(args.long), make(max(args.long // 10, 1))
        tb, what = _time_verify(big, args.repeat)
        ts, _ = _time_verify(small, args.repeat)
        print(f"{big.name:<14}{big.num_flows:>9}{big.num_steps:>9}{tb:>10.3f}  {ts:>14.3f}{tb / max(ts, 1e-9):>7.1f}  {what}")
    print(f"\n{'compiled accept path':<26}{'flows':>7}{'reference ms':>14}{'compiled ms':>13}{'speed-up':>10}")
    small = [generate("nccl-tree", 8), generate("nccl-tree", 8, slices=4), generate("ring", 64), long_chain(10_000)]
    for p in small:
        reps = max(3, args.repeat)
        tr = min(_time_verify(p, 1, compiled=False)[0] for _ in range(reps))
        tc = min(_time_verify(p, 1)[0] for _ in range(reps))
        print(f"{(p.name or 'pattern') + f' {p.num_ranks}':<26}{p.num_flows:>7}{tr * 1e3:>14.3f}{tc * 1e3:>13.3f}"
              f"{tr / tc:>9.1f}x")
    print(f"\n{'dependency lists':<26}{'flows':>7}{'reference us':>14}{'compiled us':>13}{'speed-up':>10}")
    for p in [generate("nccl-tree", 8), generate("nccl-tree", 16), generate("ring", 64)]:
        dependencies_csr(p)                           # compile or load the cache first
        reps = max(200, 2000 * 28 // p.num_flows)
        times = []
        for fn in (dependencies_numpy, dependencies_csr):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn(p)
            times.append((time.perf_counter() - t0) / reps)
        print(f"{(p.name or 'pattern') + f' {p.num_ranks}':<26}{p.num_flows:>7}{times[0] * 1e6:>14.2f}"
              f"{times[1] * 1e6:>13.2f}{times[0] / times[1]:>9.1f}x")


if __name__ == "__main__":
    main()

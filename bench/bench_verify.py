"""Time to generate and exactly verify large patterns (issue 2: 1024-rank ring in < 5 s).

Usage: python bench/bench_verify.py [--ranks 1024] [--repeat 1]
Prints, per algorithm, flows, (flow, chunk) pairs, generation and verification seconds.
"""

from __future__ import annotations

import argparse
import time

from reactccl.algorithms import generate
from reactccl.pattern import verify

CASES = [("ring", {}), ("nccl-tree", {}), ("recursive-doubling", {})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=1, help="runs per case; the best is shown")
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


if __name__ == "__main__":
    main()

"""Time to export patterns as MSCCL XML and import them back (symbolic execution, race check, verify).

Usage: python bench/bench_msccl.py [--repeat 1]
Prints, per case, flows, XML steps and size, export and import seconds (best of --repeat), and the
import/export ratio measured side by side in this run.
"""

from __future__ import annotations

import argparse
import time

from reactccl.algorithms import generate
from reactccl.pattern import from_msccl_xml, to_msccl_xml

CASES = [("ring", 32, {}), ("ring", 64, {}), ("nccl-tree", 256, {}), ("sp-allreduce", 36, {}), ("bucket", 64, {})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs per case; the best is shown")
    args = ap.parse_args()
    print(f"{'algorithm':<16}{'ranks':>6}{'flows':>8}{'steps':>8}{'kB':>8}{'export s':>10}{'import s':>10}{'ratio':>7}")
    for name, n, opts in CASES:
        p = generate(name, n, **opts)
        te = ti = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            xml = to_msccl_xml(p)
            t1 = time.perf_counter()
            from_msccl_xml(xml)
            t2 = time.perf_counter()
            te, ti = min(te, t1 - t0), min(ti, t2 - t1)
        print(f"{name:<16}{n:>6}{p.num_flows:>8}{xml.count('<step'):>8}{len(xml) // 1000:>8}{te:>10.2f}{ti:>10.2f}"
              f"{ti / te:>7.1f}")


if __name__ == "__main__":
    main()

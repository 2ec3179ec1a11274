"""Compact (symmetry) timing of torus schedules against the materialised pattern, side by side.

    .venv/bin/python bench/bench_compact.py          # 16x16 and 32x32 side by side, 64x64 compact (~2 min)
    .venv/bin/python bench/bench_compact.py --quick  # 16x16 only

For each generator with a compact form (SP, k-SP k=4, Bucket, Swing-B, Trivance-B) it
times, in one run, (a) generating the full pattern and computing its deficiency
(:func:`reactccl.cost.deficiency.deficiency`) and (b) building the compact form and
:func:`reactccl.cost.symmetric.compact_deficiency`; it prints both wall times, their
ratio, and whether Q (the bandwidth term) agrees. On 64x64 only (b) runs (the full patterns
have 67-134 M flows); peak memory is the process's ru_maxrss so far.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reactccl.algorithms import generate  # noqa: E402
from reactccl.algorithms.compact import compact_schedule  # noqa: E402
from reactccl.cost.deficiency import deficiency  # noqa: E402
from reactccl.cost.symmetric import compact_deficiency  # noqa: E402
from reactccl.topology.torus import TorusGeometry  # noqa: E402

CASES = [("sp-allreduce", {}), ("k-sp-allreduce", {"k": 4}), ("bucket", {}), ("swing-b", {}), ("trivance-b", {})]


def _timed(f):
    t = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16x16 only")
    a = ap.parse_args()
    sides = [16] if a.quick else [16, 32, 64]
    print(f"{'torus':7s} {'schedule':16s} {'flows':>11s} {'full s':>8s} {'compact s':>10s} {'ratio':>8s}  Q agrees  peak GiB")
    for n in sides:
        g, p = TorusGeometry((n, n)), n * n
        for name, opts in CASES:
            cs, tc = _timed(lambda: compact_schedule(name, p, **opts))
            dc, tc2 = _timed(lambda: compact_deficiency(cs))
            tc += tc2
            if n <= 32:
                df, tf = _timed(lambda: deficiency(generate(name, p, check=False, **opts), g))
                agree = abs(df.q - dc.q) <= 1e-12 * df.q and df.max_hops == dc.max_hops
                full_s, ratio, ok = f"{tf:8.2f}", f"{tf / tc:7.0f}x", "yes" if agree else "NO"
            else:
                full_s, ratio, ok = f"{'-':>8s}", f"{'-':>8s}", "-"
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
            print(f"{n}x{n:<4d} {name:16s} {cs.num_flows:11d} {full_s} {tc:10.3f} {ratio}  {ok:8s}  {rss:.2f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

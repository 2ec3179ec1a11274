"""Measure the emulated cluster (needs root + iproute2): prints figures, asserts nothing.

1. one TCP flow across the star at RATE (8 hosts): goodput vs the ceiling R x 1448/1514;
2. repeatability without congestion (4 hosts): the same transfer repeated, and all
   four hosts sending at once around a ring;
3. the share a host's incoming transfer gets with P external flows into it
   (reno: expected about 1/(P+1)).

    sudo .venv/bin/python bench/bench_testbed.py [--rate 200mbit] [--mbytes 25] [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import statistics as st
import sys
import time

from reactccl.testbed import Testbed, measure_transfers, netns_unavailable, parse_rate

GOODPUT = 1448 / 1514


def _summary(xs: list[float]) -> str:
    mean = st.fmean(xs)
    cv = st.pstdev(xs) / mean if len(xs) > 1 else 0.0
    return f"mean {mean:7.1f}  min {min(xs):7.1f}  max {max(xs):7.1f}  CV {100 * cv:4.1f}%"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--mbytes", type=float, default=25.0, help="MB per transfer")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cc", default="reno")
    a = ap.parse_args()
    if why := netns_unavailable():
        print(f"bench_testbed: {why}", file=sys.stderr)
        return 2
    rate, n = parse_rate(a.rate), int(a.mbytes * 1e6)
    ceiling = rate * GOODPUT / 1e6
    cpu0, t0 = os.times(), time.monotonic()
    print(f"rate {rate / 1e6:g} Mbit/s, TCP goodput ceiling {ceiling:.1f} Mbit/s, "
          f"{n / 1e6:g} MB per transfer, {a.reps} repetitions, TCP {a.cc}")

    with Testbed(hosts=8, rate=rate, cc=a.cc) as tb:
        xs = [measure_transfers(tb, [(0, 7)], n)[0].bps / 1e6 for _ in range(a.reps)]
        print(f"[1] one flow, 8-host star, 0->7 (Mbit/s):     {_summary(xs)}  "
              f"= {100 * st.fmean(xs) / ceiling:.1f}% of ceiling")

    with Testbed(hosts=4, rate=rate, cc=a.cc) as tb:
        xs = [measure_transfers(tb, [(1, 2)], n)[0].bps / 1e6 for _ in range(a.reps)]
        print(f"[2] repeat, 4 hosts, 1->2 (Mbit/s):           {_summary(xs)}")
        ring = [(r, (r + 1) % 4) for r in range(4)]
        slowest = [min(t.bps for t in measure_transfers(tb, ring, n)) / 1e6 for _ in range(a.reps)]
        print(f"[2] ring, 4 flows at once, slowest (Mbit/s):  {_summary(slowest)}")
        base = st.fmean(xs)
        for p in (1, 2, 3):
            tb.congest(into=2, flows=p)
            time.sleep(1.0)
            got = [measure_transfers(tb, [(1, 2)], n)[0].bps / 1e6 for _ in range(a.reps)]
            tb.stop_congestion()
            share = st.fmean(got) / base
            print(f"[3] P={p} external flows into rank 2, 1->2:   {_summary(got)}  share {share:.2f} "
                  f"(fair share 1/(P+1) = {1 / (p + 1):.2f})")
    cpu1 = os.times()
    cpu = (cpu1.user + cpu1.system + cpu1.children_user + cpu1.children_system
           - cpu0.user - cpu0.system - cpu0.children_user - cpu0.children_system)
    print(f"wall {time.monotonic() - t0:.1f} s, CPU {cpu:.1f} s (this process and the traffic "
          f"processes; kernel softirq time for the links is not included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

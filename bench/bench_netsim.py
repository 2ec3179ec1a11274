"""Speed of the fluid simulator (issue 2 §5 targets); prints figures, asserts nothing.

1. 100 epochs of an 8-rank nccl-tree AllReduce of 20 MB on a k=4 fat-tree with 4
   long-lived background flows (4 random (rank, outside host) pairs, 1 flow each),
   4 ECMP ports (target: < 1 s for all 100 epochs);
2. one epoch of a 128-rank ring AllReduce of 20 MB on a k=8 fat-tree (32,512 flows;
   target < 1 s), cold (first epoch: computes the shortest paths) and warm;
3. the water-filling kernel alone on random incidence lists.

    python bench/bench_netsim.py [--repeat 3]

Figures: wall and CPU seconds (best of --repeat; on a shared machine CPU is the fairer one), flows/s (job flows simulated per second),
events/s (heap events: send-done, arrival, release, burst).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from reactccl.algorithms import generate
from reactccl.netsim import RandomPairs, SimulatedCluster, max_min_rates
from reactccl.topology import fat_tree


def _line(name: str, wall: float, cpu: float, flows: int, events: int, extra: str = "") -> None:
    print(f"{name:44s} {wall:7.3f} s wall {cpu:7.3f} s cpu  {flows / wall:10,.0f} flows/s  "
          f"{events / wall:10,.0f} events/s  {extra}")


def bench_tree(repeat: int) -> None:
    pattern = generate("nccl-tree", 8)
    topo = fat_tree(4)
    best = None
    for _ in range(repeat):
        cluster = SimulatedCluster(topo, np.arange(8), 20e6, background=[RandomPairs(4, 1)], seed=1)
        t0, c0 = time.perf_counter(), time.process_time()
        traces = [cluster.run_epoch(pattern) for _ in range(100)]
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if best is None or wall < best[0]:
            best = (wall, cpu, traces)
    wall, cpu, traces = best
    events = sum(t.meta["events"] for t in traces)
    mean = np.mean([t.duration for t in traces])
    _line("nccl-tree 8 ranks, 20 MB, fat-tree k=4, 100 ep", wall, cpu, 100 * pattern.num_flows, events,
          f"(target < 1 s; mean epoch {mean * 1e3:.3f} ms)")


def bench_ring(repeat: int) -> None:
    pattern = generate("ring", 128)
    for label, fresh in (("cold", True), ("warm", False)):
        best = None
        topo = fat_tree(8)
        cluster = SimulatedCluster(topo, np.arange(128), 20e6, seed=1)
        if not fresh:
            cluster.run_epoch(pattern)  # fills the path cache
        for _ in range(repeat if not fresh else 1):
            t0, c0 = time.perf_counter(), time.process_time()
            tr = cluster.run_epoch(pattern)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if best is None or wall < best[0]:
                best = (wall, cpu, tr)
        wall, cpu, tr = best
        _line(f"ring 128 ranks ({pattern.num_flows} flows), fat-tree k=8, {label}", wall, cpu, pattern.num_flows,
              tr.meta["events"], f"(target < 1 s; epoch {tr.duration * 1e3:.3f} ms, {tr.meta['batches']} batches)")


def bench_maxmin(repeat: int) -> None:
    rng = np.random.default_rng(0)
    for flows, links, hops in ((32, 96, 4), (1024, 768, 6), (16384, 768, 6)):
        pf = np.repeat(np.arange(flows), hops)
        pl = rng.integers(links, size=flows * hops)
        cap = np.full(links, 100e9)
        best = min(_timed(lambda: max_min_rates(pf, pl, cap, flows)) for _ in range(repeat))
        print(f"max_min_rates {flows:6d} flows x {hops} links on {links} links: {best * 1e6:10.1f} us")


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="best of N runs (default 3)")
    args = ap.parse_args()
    bench_tree(args.repeat)
    bench_ring(args.repeat)
    bench_maxmin(args.repeat)


if __name__ == "__main__":
    main()

"""REACT §4.3 by two models: the flow-level simulator and the α-β model.

16 ranks on one switch, path latency α = 4 µs (2 µs per link), 100 Gbps, s = 2 MB (2·10^6 bytes),
NCCL's double binary tree without pipelining. Prints when the reduce phase ends (the last reduce
flow's arrival) with no congestion, with p = 2 long-lived external flows into rank 3, and after
swapping ranks 3 and 2 in the tree where 3 is interior (paper: 576, 656, 576 µs).

Usage: python examples/section_4_3.py
"""

import numpy as np

from reactccl.algorithms import generate
from reactccl.cost.alphabeta import alpha_beta_schedule
from reactccl.netsim import LongLived, SimulatedCluster
from reactccl.pattern import verify
from reactccl.topology import star


def reduce_end(end: np.ndarray, pattern) -> float:
    """Arrival of the last reduce-op flow, in µs."""
    return float(end[pattern.op == 0].max()) * 1e6


def main() -> None:
    p = generate("nccl-tree", 16)
    perm = np.arange(16)
    perm[[2, 3]] = [3, 2]
    interior = [g for g in (0, 1) if np.any((p.flow_graph == g) & (p.dst == 3) & (p.op == 0))][0]
    swapped = p.relabel(perm, graph=interior)
    verify(swapped)
    topo, s = star(18, rate=100e9, latency=2e-6), 2e6
    quiet = SimulatedCluster(topo, np.arange(16), s, ecmp_ports=1)
    busy = SimulatedCluster(topo, np.arange(16), s, background=[LongLived(16, 3, 2)], ecmp_ports=1)
    alpha, beta = 4e-6, 8 / 100e9
    rows = [
        ("no congestion", quiet.run_epoch(p), p, None),
        ("p = 2 flows into rank 3", busy.run_epoch(p), p, {3: 2}),
        (f"swap 3<->2 in tree {interior}", busy.run_epoch(swapped), swapped, {3: 2}),
    ]
    print(f"{'case':32s} {'simulator':>10s} {'α-β model':>10s}   (reduce phase end, µs)")
    for name, trace, pat, ext in rows:
        model = alpha_beta_schedule(pat, s, alpha, beta, external_in=ext)
        print(f"{name:32s} {reduce_end(trace.end, pat):10.1f} {reduce_end(model.end, pat):10.1f}")


if __name__ == "__main__":
    main()

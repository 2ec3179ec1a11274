"""Full-size spine-leaf goodput on the flow-level simulator (SP-allreduce §6.3, §7.6 right of Fig. 5).

The fabric: 32 leaves x 16 hosts (512 hosts), 16 spines, 400 Gb/s links, 400 ns per link
(§7.1), built by ``fabric_topology(SpineLeafGeometry(q=16, leaves=32))`` so every flow takes
the geometry's route (cross-leaf traffic through the spine named by the sender's host
index, as the cost model routes it). Every variant the ``sp-spineleaf`` experiment runs
(``family_variants``: SP, Bucket, Swing, Trivance, Ring, RD; hosts as a 32 x 16 grid for the
torus baselines) is packed as the experiment packs it and simulated once per size.

Prints per run: messages, steps, wall s (generation and packing excluded), messages/s,
completion T, goodput G = N (p - 1) / (p T) (N the message in bits) and G as a fraction of
the bound B_v / 2 = 200 Gb/s; then SP's gain over each baseline at each size. Target: each
run < 60 s wall on a 2-core machine.

    python bench/bench_spineleaf.py [--sizes 32KiB 256MiB] [--families SP Ring RD] [--shape 32x16] [--ecmp]

``--ecmp`` also runs SP on the REACT-style ``leaf_spine`` builder, whose flows pick a spine
by ECMP hash, for a side-by-side look at what hashing costs (on 8 leaves x 8 hosts: 89.0%
of the bound at 256 MiB against 99.97% with the sender's spine). Use it with a small
``--shape`` such as 8x8: hash collisions make flows finish at ~10^5 distinct times, and each
time the simulator re-solves max-min fairness over one component holding every flow, so at
32 x 16 it does not finish in 20 minutes.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from reactccl.experiments.sp_goodput import Fabric, family_variants
from reactccl.netsim import SimulatedCluster
from reactccl.topology import leaf_spine, parse_size
from reactccl.topology.torus import DEFAULT_HOP_LATENCY, DEFAULT_LINK_RATE, SpineLeafGeometry, fabric_topology

FAMILIES = ["SP", "Bucket", "Swing", "Trivance", "Ring", "RD"]


def _size_label(b: int) -> str:
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["32KiB", "256MiB"], help="message sizes (default 32KiB 256MiB)")
    ap.add_argument("--families", nargs="+", default=FAMILIES, help=f"families (default {' '.join(FAMILIES)})")
    ap.add_argument("--shape", default="32x16", help="LEAVESxQ: leaves and hosts per leaf (= spines); default 32x16")
    ap.add_argument("--ecmp", action="store_true", help="also run SP with hashed ECMP on leaf_spine (small shapes only)")
    args = ap.parse_args()
    sizes = [int(parse_size(s)) for s in args.sizes]
    try:
        LEAVES, Q = (int(v) for v in args.shape.lower().split("x"))
    except ValueError:
        ap.error(f"--shape: expected LEAVESxQ such as 32x16, got {args.shape!r}")
    fab = Fabric("spineleaf", (LEAVES, Q))
    p, bound = fab.num_nodes, fab.bound(DEFAULT_LINK_RATE)
    t0 = time.perf_counter()
    topo = fabric_topology(SpineLeafGeometry(q=Q, leaves=LEAVES), DEFAULT_LINK_RATE, DEFAULT_HOP_LATENCY)
    print(f"{topo!r}: built in {time.perf_counter() - t0:.2f} s; bound B_v/2 = {bound / 1e9:.0f} Gb/s")
    topos = [("", topo)]
    if args.ecmp:
        t0 = time.perf_counter()
        ecmp = leaf_spine(LEAVES, Q, Q, rate=DEFAULT_LINK_RATE, latency=DEFAULT_HOP_LATENCY)
        print(f"{ecmp!r}: built in {time.perf_counter() - t0:.2f} s (hashed ECMP)")
        topos.append((" ECMP", ecmp))
    print(f"{'variant':18s} {'size':>8s} {'msgs':>8s} {'steps':>5s} {'wall s':>7s} {'msgs/s':>9s} "
          f"{'T us':>10s} {'G Gb/s':>8s} {'of bound':>8s}")
    goodput: dict[tuple[str, int], float] = {}
    for var in family_variants(fab, args.families):
        try:
            t0 = time.perf_counter()
            packed = var.packed(var.pattern(p))
            gen = time.perf_counter() - t0
        except ValueError as e:  # PatternError: this variant does not exist on a 32 x 16 grid
            print(f"{var.label:18s} skipped: {str(e).splitlines()[0][:90]}")
            continue
        for suffix, tp in topos:
            if suffix and var.family != "SP":
                continue
            label = var.label + suffix
            for size in sizes:
                t0 = time.perf_counter()
                tr = SimulatedCluster(tp, np.arange(p), size, ecmp_ports=1).run_epoch(packed)
                wall = time.perf_counter() - t0
                G = size * 8 * (p - 1) / (p * tr.duration)
                goodput[(label, size)] = G
                print(f"{label:18s} {_size_label(size):>8s} {packed.num_flows:8d} {packed.num_steps:5d} "
                      f"{wall:7.2f} {packed.num_flows / wall:9,.0f} {tr.duration * 1e6:10.2f} {G / 1e9:8.2f} "
                      f"{G / bound:8.2%}", flush=True)
        print(f"{'':18s} (generate + pack {gen:.2f} s)")
    sp = next((lab for lab, _ in goodput if lab.startswith("sp-")), None)
    if sp is None:
        return
    print(f"\nSP ({sp}) gain G_SP / G_other:")
    others = list(dict.fromkeys(lab for lab, _ in goodput if lab != sp))
    print(f"{'size':>8s} " + " ".join(f"{o:>14s}" for o in others))
    for size in sizes:
        print(f"{_size_label(size):>8s} " + " ".join(
            f"{goodput[(sp, size)] / goodput[(o, size)]:14.3f}" if (o, size) in goodput else f"{'-':>14s}"
            for o in others))


if __name__ == "__main__":
    main()

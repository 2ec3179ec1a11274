"""Fluid vs packet-level (ns-3) side by side; prints figures, asserts nothing (needs reactccl[ns3]).

1. The five reference scenarios (shared/reference/ns3-anchors.md) under both reference configs:
   fluid max-min time, packet-level time, the measured ns-3 reference, the packet/reference error,
   and the speed ratio (packet-level wall time of Simulator::Run over the fluid engine's wall time,
   best of --repeat each; target: fluid >= 500x faster).
2. One 8-rank nccl-tree AllReduce epoch of 20 MB on fat-tree k=4 (REACT §7.3 transport ``dctcp``,
   4 persistent connections per flow, one long-lived background flow into rank 3): wall and CPU
   time per epoch, packets/s (every hop's transmission counts), and the time a 100-epoch REACT run
   (REACT arm only, as ``simulate --react`` runs it beside the baseline) would take at that rate;
   ``--react-epochs N`` runs N epochs of it with the REACT controller for real.

   ``--replicas 2`` runs those epochs on two network replicas, one process each
   (:mod:`reactccl.packetsim.replicas`).

    python bench/bench_packetsim.py [--repeat 2] [--epochs 3] [--react-epochs 0] [--replicas 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from reactccl.algorithms import generate
from reactccl.packetsim import PacketCluster, packet_replicas
from reactccl.packetsim import anchors
from reactccl.topology import fat_tree


def bench_anchors(repeat: int) -> None:
    ref = anchors.reference()["scenarios"]
    print(f"{'scenario':10s} {'config':9s} {'fluid µs':>9s} {'packet µs':>10s} {'ref µs':>10s} {'pkt/ref':>8s} "
          f"{'fluid wall':>11s} {'ns-3 Run':>9s} {'ns-3 cpu':>9s} {'ratio':>8s}")
    ratios = []
    for name in anchors.ANCHORS:
        fluid_wall = min(_timed(lambda: anchors.run_fluid(name))[1] for _ in range(max(repeat, 3)))
        fluid = anchors.run_fluid(name)["time_s"]
        for config in ("default", "dctcp_red"):
            runs = []
            for _ in range(repeat):
                c0 = time.process_time()
                r = anchors.run_packet(name, config)
                runs.append((r["wall_s"], time.process_time() - c0, r))
            wall, cpu, r = min(runs, key=lambda x: x[0])
            want = ref[name]["ns3_us"][config]
            got = r["time_s"] * 1e6
            ratios.append(wall / fluid_wall)
            print(f"{name:10s} {config:9s} {fluid * 1e6:9.1f} {got:10.3f} {want:10.3f} {(got / want - 1) * 100:+7.2f}% "
                  f"{fluid_wall * 1e3:9.2f}ms {wall:8.2f}s {cpu:8.2f}s {wall / fluid_wall:7.0f}x")
    print(f"speed ratio packet/fluid: min {min(ratios):.0f}x, median {np.median(ratios):.0f}x, max {max(ratios):.0f}x "
          "(target: fluid >= 500x faster)")


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def bench_tree(epochs: int, react_epochs: int, replicas: int = 1) -> None:
    pattern = generate("nccl-tree", 8)
    topo = fat_tree(4)
    t0 = time.perf_counter()
    cluster = PacketCluster(topo, np.arange(8), 20e6, background=["into:3:p=1"], seed=1, transport="dctcp")
    build = time.perf_counter() - t0
    rows = []
    for e in range(epochs):
        c0 = time.process_time()
        tr = cluster.run_epoch(pattern)
        rows.append((tr.meta["wall_s"], time.process_time() - c0, tr.meta["packets"], tr.duration))
    print(f"nccl-tree 8 ranks, 20 MB, fat-tree k=4, dctcp, into:3:p=1 (network built in {build:.1f} s; ns-3 import not included if already loaded)")
    for e, (wall, cpu, pk, dur) in enumerate(rows):
        print(f"  epoch {e}: {dur * 1e3:7.3f} ms simulated  {wall:6.1f} s wall {cpu:6.1f} s cpu  {pk:,} packets  "
              f"{pk / wall:,.0f} packets/s")
    if rows:
        wall = float(np.median([r[0] for r in rows]))
        cpu = float(np.median([r[1] for r in rows]))
        print(f"  100 epochs at this rate: {100 * wall / 60:.1f} min wall, {100 * cpu / 60:.1f} min cpu "
              "(target: a 100-epoch REACT run < 30 min on 2 cores)")
    if react_epochs:
        from reactccl.tuner import ReactParams, run_react

        t0, c0 = time.perf_counter(), time.process_time()
        args = (topo, np.arange(8), 20e6)
        kw = dict(background=["into:3:p=1"], seed=1, transport="dctcp")
        cluster = PacketCluster(*args, **kw) if replicas == 1 else packet_replicas(replicas, *args, **kw)

        def progress(done: int, total: int) -> None:
            if done % 10 == 0:
                print(f"    {done} epochs: {time.perf_counter() - t0:.0f} s wall", flush=True)

        try:       # run_react tells the replicas the settled patterns ahead (reactccl.contract)
            run = run_react(cluster, pattern, react_epochs, ReactParams(seed=1), progress=progress)
        finally:
            if replicas > 1:
                cluster.close()
        durs = run.durations
        where = "in this process" if replicas == 1 else (f"on {replicas} replicas (epochs used per replica "
                                                         f"{cluster.used}, speculative epochs dropped {cluster.dropped})")
        print(f"  REACT run, {react_epochs} epochs {where}: {time.perf_counter() - t0:.0f} s wall, "
              f"{time.process_time() - c0:.0f} s cpu of this process; mean epoch {np.mean(durs) * 1e3:.3f} ms, "
              f"{len(run.decisions)} decisions, last 20 epochs {np.mean(durs[-20:]) * 1e3:.3f} ms, "
              f"first 10 {np.mean(durs[:10]) * 1e3:.3f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="runs per packet-level scenario (best kept)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs of the fat-tree benchmark")
    ap.add_argument("--react-epochs", type=int, default=0, help="also run this many epochs with REACT")
    ap.add_argument("--replicas", type=int, default=1,
                    help="run the REACT epochs on this many network replicas, one process each "
                         "(reactccl.packetsim.replicas: speculates on the pattern staying the same)")
    ap.add_argument("--skip-anchors", action="store_true")
    args = ap.parse_args()
    if not args.skip_anchors:
        bench_anchors(args.repeat)
    bench_tree(args.epochs, args.react_epochs, args.replicas)


if __name__ == "__main__":
    main()

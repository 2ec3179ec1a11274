"""REACT tuner costs: decision time per batch and time to find the viable (②/③) swap sets.

Usage: python bench/bench_tuner.py [--ranks 8 64 256] [--sets 64 256] [--no-overhead] [--gloo EPOCHS]

Prints, for an nccl-tree with one congested rank (synthetic traces, no network): the time of the
batch decision (cold: viable sets computed on the way; warm: sets cached), swaps tried and the
estimated gain, for the present search (``search="local"``: local search over ①②③ on the
LinkModel) side by side with the paper's Algorithm 1 (``search="greedy"``), in one run (targets:
local decision <= 0.5 s at 64 ranks, <= 5 s at 256, warm); then the time of :func:`find_viable_swaps` against the paper's brute force
(verify every candidate; estimated from a sample of 200 candidates) for 64 and 256 ranks; then
REACT's overhead with no congestion on the simulator (8-rank tree, 20 MB, star, 100 epochs);
with ``--gloo EPOCHS``, REACT on real ranks with no congestion (4 Gloo processes on localhost,
ring and nccl-tree, 4 MB): the pattern changes it made (target 0) and the mean time of the last
half of the epochs with REACT on against off and against the control plane alone (a controller
that never decides), in one run (the machine's own noise is in all three).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from reactccl.algorithms import generate
from reactccl.pattern import PatternError, verify
from reactccl.tuner import ReactController, ReactParams, ViableSwaps, apply_window_swap, candidate_windows, \
    find_viable_swaps
from reactccl.tuner.synthetic import SyntheticExecutor


def decision_time(n: int, memo: dict | None, search: str = "local",
                  estimator: str = "closed") -> tuple[float, int, float, dict]:
    p = generate("nccl-tree", n)
    params = ReactParams(search=search, estimator=estimator)
    ctrl = ReactController(p, params)
    if memo is not None:
        ctrl.viable = ViableSwaps(params.seed, memo=memo)
    ex = SyntheticExecutor(slow_into={3: 3.0}, noise=0.01, seed=1)
    for e in range(params.B - 1):
        ctrl.observe(ex.run_epoch(ctrl.pattern_for_epoch(e)))
    last = ex.run_epoch(ctrl.pattern_for_epoch(params.B - 1))
    t0 = time.perf_counter()
    d = ctrl.observe(last)
    dt = time.perf_counter() - t0
    return dt, (d.tried if d else 0), (d.estimated_gain if d else 1.0), ctrl.viable.memo


def sets_time(n: int) -> tuple[float, int, int, float]:
    p = generate("nccl-tree", n)
    t0 = time.perf_counter()
    s = find_viable_swaps(p)
    fast = time.perf_counter() - t0
    cand = candidate_windows(p)
    rng = np.random.default_rng(0)
    pick = rng.choice(len(cand), size=min(200, len(cand)), replace=False)
    t0 = time.perf_counter()
    for i in pick:
        q = apply_window_swap(p, int(cand.graph[i]), int(cand.t0[i]), int(cand.t1[i]), int(cand.a[i]), int(cand.b[i]))
        try:
            verify(q)
        except PatternError:
            pass
    per = (time.perf_counter() - t0) / len(pick)
    return fast, len(s), len(cand), per * len(cand)


def overhead() -> None:
    from reactccl.netsim import SimulatedCluster
    from reactccl.topology.builders import star
    from reactccl.tuner import run_baseline, run_react
    p = generate("nccl-tree", 8)
    def mk():
        return SimulatedCluster(star(8), list(range(8)), 20e6, seed=1)
    b = run_baseline(mk(), p, 100).stats(25)
    r = run_react(mk(), p, 100)
    s = r.stats(25)
    print(f"\nno congestion (p = 0), 8-rank nccl-tree, 20 MB, star, epochs 25-99: baseline algbw "
          f"{b['algbw_Bps'] / 1e9:.4f} GB/s, REACT {s['algbw_Bps'] / 1e9:.4f} GB/s "
          f"({100 * (s['algbw_Bps'] / b['algbw_Bps'] - 1):+.2f}%), {len(r.decisions)} decisions")


class _NullController:
    """Observes and never decides: the control plane's own cost."""

    def __init__(self, pattern) -> None:
        self.searches, self.triggers = 0, []

    def observe(self, trace):
        return None


def _gloo_child(rank: int, world: int, algorithm: str, epochs: int, react, null: bool = False):
    import torch
    from reactccl.torch import ReactAllReduce
    ar = ReactAllReduce(algorithm=algorithm, react=react, timeout=60, **({"controller": _NullController} if null else {}))
    x = torch.ones(1 << 20)                 # 4 MB of float32
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        ar(x)
        times.append(time.perf_counter() - t0)
    changes = len(ar.changes) if react else 0
    ctrl = getattr(ar.tuner, "controller", None) if react else None
    searches = (getattr(ctrl, "searches", 0), getattr(ctrl, "triggers", [])) if rank == 0 else (0, [])
    ar.close()
    return changes, times, searches


def gloo(epochs: int) -> None:
    from reactccl.runtime.local import run_local
    print(f"\nno congestion on Gloo (4 processes, localhost, 4 MB, {epochs} epochs): REACT on vs off")
    for algorithm in ("ring", "nccl-tree"):
        off = run_local(_gloo_child, 4, algorithm, epochs, False, timeout=600)
        on = run_local(_gloo_child, 4, algorithm, epochs, True, timeout=600)
        null = run_local(_gloo_child, 4, algorithm, epochs, True, True, timeout=600)
        half = epochs // 2
        t_off = float(np.mean([np.mean(t[half:]) for _, t, _ in off]))
        t_on = float(np.mean([np.mean(t[half:]) for _, t, _ in on]))
        t_null = float(np.mean([np.mean(t[half:]) for _, t, _ in null]))
        print(f"  {algorithm:10} pattern changes {max(c for c, _, _ in on)}, searches {on[0][2][0]} {on[0][2][1][:4]}, "
              f"mean time epochs {half}..{epochs - 1}: "
              f"off {t_off * 1e3:.2f} ms, on {t_on * 1e3:.2f} ms ({100 * (t_off / t_on - 1):+.1f}% gain), "
              f"control plane only (a controller that never decides) {t_null * 1e3:.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 256])
    ap.add_argument("--sets", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--no-overhead", action="store_true")
    ap.add_argument("--gloo", type=int, default=0, metavar="EPOCHS", help="also run REACT on 4 Gloo ranks")
    args = ap.parse_args()
    print("decision time per batch (nccl-tree, rank 3 ingress 3x slower, B = 6; greedy: K_t = 15)")
    print(f"{'ranks':>6}{'search':>14}{'cold s':>10}{'warm s':>10}{'tried':>7}{'est. gain':>11}{'warm/greedy':>13}")
    for n in args.ranks:
        warm_g = None
        for search, est in (("greedy", "closed"), ("local", "closed"), ("local", "fluid")):
            cold, tried, gain, memo = decision_time(n, None, search, est)
            warm, _, _, _ = decision_time(n, memo, search, est)
            warm_g = warm if search == "greedy" else warm_g
            name = search if search == "greedy" else f"{search}/{est}"
            print(f"{n:>6}{name:>14}{cold:>10.3f}{warm:>10.3f}{tried:>7}{gain:>11.3f}{warm / warm_g:>13.2f}")
    print("\nviable ②/③ sets of nccl-tree (exact algebraic method vs brute-force verify of every candidate)")
    print(f"{'ranks':>6}{'candidates':>12}{'viable':>9}{'fast s':>9}{'brute s (est.)':>16}{'speed-up':>10}")
    for n in args.sets:
        fast, nv, nc, brute = sets_time(n)
        print(f"{n:>6}{nc:>12}{nv:>9}{fast:>9.2f}{brute:>16.0f}{brute / fast:>9.0f}x")
    if not args.no_overhead:
        overhead()
    if args.gloo:
        gloo(args.gloo)


if __name__ == "__main__":
    main()

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
ring and nccl-tree, 4 MB): the pattern changes it made (target 0, and its decision log if any)
and, over the last half of the epochs, the per-epoch paired ratio of REACT on to off and of the
control plane alone (a controller that never decides) to off, the three arms interleaved epoch by
epoch on one group (target |gain| <= 0.5%: on/off within 1 +- 0.005; on 2 shared cores the
interval stays a few % wide after 500 pairs, so it reads "inside the noise"; ``bench_testbed_p0.py``
reads it on shaped links, where an epoch is bandwidth-bound and the interval a few tenths). The tuner threads of
"on" and "control" run their rounds right after their own epochs, so part of that work falls in
the next arm's epoch, often "off": the ratios understate the control plane's cost a little.
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


def _gloo_child(rank: int, world: int, algorithm: str, epochs: int):
    import torch
    import torch.distributed as dist

    from _stats import rep_order
    from reactccl.torch import ReactAllReduce
    arms = {"off": ReactAllReduce(algorithm=algorithm, react=False, timeout=60),
            "on": ReactAllReduce(algorithm=algorithm, timeout=60),
            "control": ReactAllReduce(algorithm=algorithm, controller=_NullController, timeout=60)}
    x = torch.ones(1 << 20)                 # 4 MB of float32
    times = {k: [] for k in arms}
    for e in range(epochs):                 # the three arms in a shuffled order per epoch, after a barrier
        for k in rep_order(list(arms), 0, e):
            dist.barrier()
            t0 = time.perf_counter()
            arms[k](x)
            mine = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)      # the slowest rank's time
            times[k].append(float(mine))
    on = arms["on"]
    ctrl = on.tuner.controller if rank == 0 else None
    out = dict(times=times, changes=len(on.changes),
               searches=(getattr(ctrl, "searches", 0), getattr(ctrl, "triggers", [])) if ctrl else (0, []),
               log=ctrl.decisions.report() if ctrl is not None and on.changes else "")
    for ar in arms.values():
        ar.close()
    return out


def gloo(epochs: int) -> None:
    """REACT on real ranks with no congestion: three arms on one group, timed epoch by epoch in a
    shuffled order (``bench/_stats.rep_order``), so the machine's load moves all three alike; the
    ratios are the median of per-epoch paired ratios with a 95% interval (``bench/_stats.py``)."""
    from _stats import format_ci, median_ci, paired_ratios
    from reactccl.runtime.local import run_local
    half = epochs // 2
    print(f"\nno congestion on Gloo (4 processes, localhost, 4 MB, {epochs} epochs, the arms interleaved): "
          f"REACT on and the control plane alone (a controller that never decides) against off, "
          f"epochs {half}..{epochs - 1}")
    for algorithm in ("ring", "nccl-tree"):
        res = run_local(_gloo_child, 4, algorithm, epochs, timeout=1200)
        t = res[0]["times"]
        ratio = {k: median_ci(paired_ratios([t[k][half:]], [t["off"][half:]])) for k in ("on", "control")}
        print(f"  {algorithm:10} pattern changes {res[0]['changes']}, searches {res[0]['searches'][0]} "
              f"{res[0]['searches'][1][:4]}; off {np.median(t['off'][half:]) * 1e3:.2f} ms, "
              f"on/off {format_ci(*ratio['on'], digits=3)}, control/off {format_ci(*ratio['control'], digits=3)}")
        if res[0]["log"]:
            print("    " + res[0]["log"].replace("\n", "\n    "))


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

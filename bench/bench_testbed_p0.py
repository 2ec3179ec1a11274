"""REACT at p = 0 on real Gloo ranks over rate-limited links (issue 8: "p = 0: 0 pattern changes and
|gain| <= 0.5% in the Gloo runtime"); needs root and iproute2, prints figures, asserts nothing.

On four localhost processes (``bench_tuner.py --gloo``) an epoch's time is mostly CPU scheduling on
two shared cores, and the paired interval on REACT's gain stays +-2-3% wide after 500 pairs. Here
the ranks run in the emulated cluster (:class:`reactccl.testbed.Testbed`, one network
namespace per host, each host link shaped to ``--rate``), so an epoch is bandwidth-bound: a ring's
repeats to under a percent, a tree's (two trees' TCP flows on each link) varies about +-10% at 2 MB
and +-6% at 8 MB, so the tree wants many more pairs. The static pattern (``baseline``) and the same pattern under REACT
(``react``) alternate in segments of ``--segment`` epochs (the worker's ABAB order), with no external
flow. The first epoch of every segment is left out of both arms: REACT's tuner thread runs its
control-plane round right after REACT's epochs, so with one epoch per segment that work fell into the
baseline's next epoch (a first run that way read REACT 0.76% *faster* on the tree, [+0.08, +1.87]%,
with 0 changes); within a segment each arm follows itself, so REACT's epochs carry its own control
plane and the baseline's carry none. Epoch k of a segment is paired with epoch k of the other arm's
segment in the same round (``--keep-first`` keeps every epoch; ``--segment 1 --keep-first
--rounds 400 --skip 50`` is that first, biased run). Printed per algorithm: REACT's pattern changes
(target 0), its decision log if it made any, and the median of the paired ratios react / baseline over the rounds after
``--skip``, with a distribution-free 95% interval (``bench/_stats.py``). The gain is
``1 / ratio - 1``; the target reads *met* when the whole interval lies within 1 +- 0.005.

    sudo .venv/bin/python bench/bench_testbed_p0.py [--hosts 4] [--rate 200mbit] [--mbytes 2]
        [--segment 5] [--rounds 100] [--skip 10] [--keep-first] [--algorithms ring,nccl-tree] [--save DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from _stats import band_verdict, format_ci, median_ci, paired_ratios, segment_pairs

from reactccl.testbed import netns_unavailable
from reactccl.testbed.experiment import ExperimentConfig, run_experiment

TOLERANCE = 0.005   # the issue's |gain| <= 0.5%


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--rate", default="200mbit", help="every host link's rate (tc units, default 200mbit)")
    ap.add_argument("--mbytes", type=float, default=2.0, help="AllReduce size in MB (default 2)")
    ap.add_argument("--segment", type=int, default=5, help="epochs per segment, the first left out (default 5)")
    ap.add_argument("--rounds", type=int, default=100, help="segments per arm, ABAB (default 100)")
    ap.add_argument("--skip", type=int, default=10, help="first rounds left out (default 10)")
    ap.add_argument("--keep-first", action="store_true", help="keep each segment's first epoch (biased; see above)")
    ap.add_argument("--algorithms", default="ring,nccl-tree")
    ap.add_argument("--save", metavar="DIR", help="keep each run's results.json (every epoch time) in DIR/ALGORITHM")
    a = ap.parse_args()
    if why := netns_unavailable():
        print(f"bench_testbed_p0: {why}", file=sys.stderr)
        return 2
    drop = 0 if a.keep_first else 1
    if a.segment <= drop or not 0 <= a.skip < a.rounds - 2:
        ap.error(f"--segment {a.segment} / --skip {a.skip}: need an epoch per segment after the first "
                 f"(or --keep-first) and 3+ rounds after the skip")
    print(f"p = 0 on the emulated cluster: {a.hosts} hosts at {a.rate}, {a.mbytes:g} MB AllReduce, "
          f"baseline and REACT alternating in segments of {a.segment} epochs, {a.rounds} each; ratios over "
          f"rounds {a.skip}..{a.rounds - 1}, each segment's first epoch {'kept' if drop == 0 else 'left out'} "
          f"(target: 0 changes, react/baseline within 1 +- {TOLERANCE})")
    for algorithm in filter(None, a.algorithms.split(",")):
        cfg = ExperimentConfig(hosts=[a.hosts], flows=[0], rate=a.rate, mbytes=a.mbytes, epochs=a.segment,
                               rounds=a.rounds, skip=0, algorithm=algorithm, modes=("baseline", "react"),
                               timeout=max(900.0, 3.0 * a.segment * a.rounds))
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="reactccl-p0-") as tmp:
            res = run_experiment(cfg, f"{a.save}/{algorithm}" if a.save else tmp, progress=lambda s: None)
        run = res["runs"][0]["modes"]
        base, react = run["baseline"]["epoch_times"], run["react"]["epoch_times"]
        react, base = segment_pairs(react, base, a.segment, a.skip, drop)
        med, low, high = median_ci(paired_ratios([react], [base]))
        bmed, blo, bhi = median_ci([t * 1e3 for t in base])
        print(f"  {algorithm:10} pattern changes {run['react'].get('changes', 0)}; baseline epoch "
              f"{bmed:.1f} ms [{blo:.1f}-{bhi:.1f}] ({len(base)} pairs); "
              f"react/baseline {format_ci(med, low, high, digits=4)} -> gain {100 * (1 / med - 1):+.2f}% "
              f"[{100 * (1 / high - 1):+.2f}, {100 * (1 / low - 1):+.2f}]: {band_verdict(low, high, TOLERANCE)} "
              f"({time.monotonic() - t0:.0f} s)", flush=True)
        if run["react"].get("changes"):
            print("    " + run["react"].get("report", "").replace("\n", "\n    "))
    return 0


if __name__ == "__main__":
    sys.exit(main())

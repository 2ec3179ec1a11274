"""REACT with no congestion (p = 0) on the simulator: pattern changes and gain against the baseline.

8-rank nccl-tree, 20 MB, 100 epochs, random placement, seeds 1-3, on star:hosts=16, fat-tree k=8
and fat-tree k=4 (issue 8 target: 0 changes, |gain| <= 0.5%); ``run_react`` beside
``run_baseline`` on ``SimulatedCluster``, metrics after epoch 25.

    python bench/bench_react_p0.py [auto|closed|fluid]
"""

import sys, numpy as np
from reactccl.algorithms import generate
from reactccl.netsim import SimulatedCluster
from reactccl.topology import parse_topology, placement
from reactccl.tuner import run_baseline, run_react, ReactParams
est = sys.argv[1] if len(sys.argv) > 1 else "auto"
p = generate("nccl-tree", 8, slices=1)      # the REACT paper's tree: one slice per tree, by name
for topo_s in ("star:hosts=16", "fat-tree:k=8", "fat-tree:k=4"):
    topo = parse_topology(topo_s)
    for seed in (1, 2, 3):
        hosts = placement(topo, 8, "random", seed=seed)
        mk = lambda: SimulatedCluster(topo, hosts, 20e6, seed=seed)
        b = run_baseline(mk(), p, 100).stats(25)
        r = run_react(mk(), p, 100, ReactParams(estimator=est))
        rs = r.stats(25)
        ch = sum(1 for d in r.decisions if d.kind in ("transform", "revert"))
        print(est, topo_s, seed, "changes", ch, f"gain {100*(b['mean_s']/rs['mean_s']-1):+.2f}%" if 'mean_s' in b else (b, rs), flush=True)

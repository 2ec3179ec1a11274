"""Run a collective pattern on 4 local processes and look at its flows.

    .venv/bin/python examples/rcollective_basic.py                     # nccl-tree, 1 MB
    .venv/bin/python examples/rcollective_basic.py --algorithm ring --ranks 5 --mbytes 4

Each process joins a Gloo group on localhost, runs the pattern with
:class:`reactccl.runtime.RCollective` on a float32 message, checks the result
against ``dist.all_reduce``, then swaps two ranks (a REACT relabelling: same
group, new rank-to-position map) and runs again. Rank 0 prints each epoch's
trace: duration, bus bandwidth and the slowest flows (start of send to data
available at the receiver).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.distributed as dist

from reactccl.algorithms import generate
from reactccl.runtime import RCollective, run_local
from reactccl.trace import format_bytes, format_rate, format_time


def _rank_main(rank: int, world: int, algorithm: str, numel: int) -> list[str]:
    pattern = generate(algorithm, world)
    rc = RCollective(pattern, timeout=60)
    lines = []
    swap = np.arange(world)
    swap[[0, world - 1]] = swap[[world - 1, 0]]
    for label, p in (("as generated", pattern), (f"ranks 0 and {world - 1} swapped", pattern.relabel(swap))):
        rc.set_pattern(p)
        x = torch.randn(numel, generator=torch.Generator().manual_seed(rank))
        want = x.clone()
        dist.all_reduce(want)
        rc(x)
        err = float((x - want).abs().max())
        tr = rc.gather_trace()
        lines.append(f"{p.name} {label}: {format_bytes(tr.message_bytes)} in {format_time(tr.duration)}, "
                     f"busbw {format_rate(tr.busbw)}, max |difference to dist.all_reduce| {err:.2e}")
        for f in tr.slowest(3):
            lines.append(f"   flow {f['flow']:3d} step {f['step']} {f['src']}->{f['dst']} "
                         f"{format_bytes(f['bytes']):>10} fct {format_time(f['fct'])}")
    rc.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algorithm", default="nccl-tree")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--mbytes", type=float, default=1.0)
    a = ap.parse_args(argv)
    from reactccl.runtime.argcheck import allreduce_algorithm_error
    if allreduce_algorithm_error(a.algorithm):
        ap.error(allreduce_algorithm_error(a.algorithm))
    if not 1 <= a.ranks <= 64:
        ap.error(f"--ranks: expected 1..64 local processes, got {a.ranks}")
    if not a.mbytes > 0:
        ap.error(f"--mbytes: expected a size > 0 (MB), got {a.mbytes}")
    numel = max(1, int(a.mbytes * 1e6) // 4)
    print("\n".join(run_local(_rank_main, a.ranks, a.algorithm, numel, timeout=300)[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

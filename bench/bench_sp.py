"""Scale of SP-allreduce: generate and check it on n x n tori, and simulate it once.

    .venv/bin/python bench/bench_sp.py            # 8x8, 16x16, 32x32, 64x64 (about 2-4 minutes)
    .venv/bin/python bench/bench_sp.py --quick    # 8x8 and 16x16 only

Per size it prints wall time and peak memory (ru_maxrss) of each stage:

* n <= 16: the full pattern, the exact count check (``verify``), the structural tree check
  and the deficiency metrics (Ψ, Θ, Ω).
* n = 32: the full pattern (1024 nodes, 4096 chunks, 8.4 M flows; target < 30 s), the
  structural tree check and metrics over all flows, the symmetry check, and one netsim run of
  256 MiB on the packed pattern (target < 60 s; messages/s reported).
* n = 64: nothing per flow is materialised (the pattern would have 134 M flows): the base BFS
  tree, the 16384 group elements (int32) and :func:`check_sp_symmetry`, which proves the
  tree is BFS, the elements are automorphisms acting regularly on links, and gives every
  round's link load (target < 60 s, < 8 GiB).

Targets come from issue 5; this script only reports measured figures.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reactccl.algorithms import generate  # noqa: E402
from reactccl.algorithms.sp_check import check_sp_symmetry, check_tree_family  # noqa: E402
from reactccl.algorithms.torus_common import bfs_tree, pack, torus_group  # noqa: E402
from reactccl.cost.deficiency import deficiency  # noqa: E402
from reactccl.pattern import verify  # noqa: E402
from reactccl.topology.torus import TorusGeometry, fabric_topology  # noqa: E402


def rss_gib() -> float:
    """Peak resident memory of this process so far, GiB (Linux ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class Clock:
    def __init__(self, label: str) -> None:
        self.label, self.t0 = label, time.perf_counter()
        self.total = 0.0

    def lap(self, what: str, extra: str = "") -> None:
        dt = time.perf_counter() - self.t0
        self.total += dt
        print(f"  {self.label:7s} {what:34s} {dt:8.2f} s   peak {rss_gib():5.2f} GiB  {extra}", flush=True)
        self.t0 = time.perf_counter()


def full(n: int, exact: bool, simulate: bool) -> None:
    p = n * n
    g = TorusGeometry((n, n))
    c = Clock(f"{n}x{n}")
    pat = generate("sp-allreduce", p, check=False)
    c.lap("generate full pattern", f"{pat.num_chunks} chunks, {pat.num_flows} flows, {pat.num_steps} steps")
    if exact:
        verify(pat)
        c.lap("exact count verification")
    check_tree_family(pat, g)
    c.lap("structural tree check (all flows)")
    d = deficiency(pat, g)
    c.lap("deficiency metrics", f"Psi {d.psi:.4f} Theta {d.theta:.4f} Omega {d.omega:.4f}")
    print(f"  {c.label:7s} {'generate + check total':34s} {c.total:8.2f} s")
    if simulate:
        from reactccl.netsim import SimulatedCluster
        packed = pack(pat)
        del pat
        c.lap("pack (one message per link and round)", f"{packed.num_flows} messages")
        cl = SimulatedCluster(fabric_topology(g), np.arange(p), 256 * 2**20, ecmp_ports=1)
        t0 = time.perf_counter()
        tr = cl.run_epoch(packed)
        wall = time.perf_counter() - t0
        G = 256 * 2**20 * 8 * (p - 1) / (p * tr.duration)
        c.lap("netsim 256 MiB", f"T = {tr.duration * 1e3:.3f} ms, G = {G / 1e9:.1f} Gb/s, "
              f"{packed.num_flows / wall:.0f} messages/s")


def symmetric(n: int) -> None:
    g = TorusGeometry((n, n))
    c = Clock(f"{n}x{n}")
    parent = bfs_tree(g)
    perms = torus_group(g).astype(np.int32)
    c.lap("base tree + group (int32)", f"{perms.shape[0]} elements, {perms.nbytes / 2**20:.0f} MiB")
    info = check_sp_symmetry(g, parent, perms)
    load = np.asarray(info["round_load"])
    Q = 2 * load.sum()
    c.lap("symmetry check + round loads", f"{info['rounds']} rounds, Q = {Q:.6f} N "
          f"(2(p-1)/(pD) = {2 * (n * n - 1) / (n * n * 4):.6f})")
    print(f"  {c.label:7s} {'generate + check total':34s} {c.total:8.2f} s  "
          f"(full pattern would hold {2 * (n * n - 1) * perms.shape[0]} flows)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8x8 and 16x16 only")
    args = ap.parse_args()
    print("SP-allreduce scale (stage, wall time, peak memory so far)")
    full(8, exact=True, simulate=False)
    full(16, exact=True, simulate=False)
    if not args.quick:
        full(32, exact=False, simulate=True)
        symmetric(32)
        symmetric(64)
    return 0


if __name__ == "__main__":
    sys.exit(main())

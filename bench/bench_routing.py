"""Routing at scale: fewest-hop path tables from compiled BFS against the networkx walk, side by side.

For each row: a topology, a 1024-rank pattern placed ``first``, and the distinct (src, dst) host pairs
of its flows. ``old`` finds their path tables as routing did before (``networkx.predecessor`` once per
source, kept per source, then the walk back from each destination; on a servers topology the same
walk over the fabric links, with the server routing around it); ``new`` is what ``Topology`` does now
(:class:`reactccl.topology.paths.FewestHops`, batched). Both start from a fresh topology (no cached
paths); the tables are checked equal. ``ecmp`` is the whole ``ecmp_paths`` call an engine makes (4
ports per flow) on a fresh topology. A second table gives the build time of each topology and the
peak RSS of a process that only builds it, over one that only imports the package.

    python bench/bench_routing.py [--ranks 1024] [--skip-old] [--rows fat-tree:k=32 rail:servers=128,gpus=8]

Targets (issue 32, item 6): routing of a 1024-rank tree on fat-tree k=32 was 57 of 58 s of its run;
the new tables make it a small part.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import networkx as nx
import numpy as np

from reactccl.algorithms import generate
from reactccl.topology import parse_topology, placement
from reactccl.topology.paths import nx_fewest_hop_paths

ROWS = ["fat-tree:k=32", "rail:servers=128,gpus=8"]


def pairs_of(spec: str, algorithm: str, ranks: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (src host, dst host) of the pattern's flows, placed ``first``."""
    topo = parse_topology(spec)
    pat = generate(algorithm, ranks)
    hosts = placement(topo, ranks, "first")
    key = np.unique(hosts[pat.src] * topo.num_hosts + hosts[pat.dst])
    return key // topo.num_hosts, key % topo.num_hosts


def old_tables(spec: str, src: np.ndarray, dst: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """The networkx walk (predecessor lists per source, as before) on a fresh topology: (s, tables)."""
    topo = parse_topology(spec)
    t0 = time.perf_counter()
    if topo.servers is not None:
        tables = topo.servers.path_tables(topo, src, dst, reference=True, preds={})
    else:
        preds: dict = {}
        tables = []
        for s, d in zip(src.tolist(), dst.tolist(), strict=True):
            a = topo.hosts[s]
            if a not in preds:
                preds[a] = nx.predecessor(topo.graph, a)
            tables.append(nx_fewest_hop_paths(topo.graph, topo._link_of, a, topo.hosts[d], preds[a]))
    return time.perf_counter() - t0, tables


def new_tables(spec: str, src: np.ndarray, dst: np.ndarray) -> tuple[float, list[np.ndarray]]:
    topo = parse_topology(spec)
    t0 = time.perf_counter()
    tables = topo._path_tables(src, dst)
    return time.perf_counter() - t0, tables


def ecmp_time(spec: str, algorithm: str, ranks: int, ports: int = 4) -> float:
    topo = parse_topology(spec)
    pat = generate(algorithm, ranks)
    hosts = placement(topo, ranks, "first")
    F = pat.num_flows
    keys = np.column_stack([np.zeros(ports * F, int), np.tile(np.arange(F), ports), np.repeat(np.arange(ports), F)])
    t0 = time.perf_counter()
    topo.ecmp_paths(np.tile(hosts[pat.src], ports), np.tile(hosts[pat.dst], ports), keys)
    return time.perf_counter() - t0


_CHILD = """
import json, sys, time
import reactccl.topology as T
spec = sys.argv[1]
t0 = time.perf_counter()
topo = T.parse_topology(spec) if spec else None
dt = time.perf_counter() - t0
hwm = [int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:")][0]
print(json.dumps({"s": dt, "rss": hwm, "links": topo.num_links if topo else 0, "hosts": topo.num_hosts if topo else 0}))
"""


def build_cost(spec: str) -> dict:
    """Build time and peak RSS (bytes, VmHWM: ru_maxrss would carry the parent's over exec) of a
    process that builds ``spec`` ("" = import only)."""
    out = subprocess.run([sys.executable, "-c", _CHILD, spec], capture_output=True, text=True, check=True,
                         timeout=600)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--rows", nargs="+", default=ROWS, help=f"topology specs (default {' '.join(ROWS)})")
    ap.add_argument("--algorithms", nargs="+", default=["nccl-tree", "ring"])
    ap.add_argument("--skip-old", action="store_true", help="leave out the networkx walk (minutes at k=32)")
    args = ap.parse_args()
    print(f"{'topology':<26} {'pattern':<10} {'pairs':>6} {'old s':>8} {'new s':>7} {'old/new':>8} {'ecmp s':>7}")
    for spec in args.rows:
        for algo in args.algorithms:
            src, dst = pairs_of(spec, algo, args.ranks)
            t_new, new = new_tables(spec, src, dst)
            if args.skip_old:
                t_old, ratio = float("nan"), "-"
            else:
                t_old, old = old_tables(spec, src, dst)
                bad = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if not np.array_equal(a, b)]
                if bad:
                    raise SystemExit(f"{spec} {algo}: tables differ for pair {src[bad[0]]}->{dst[bad[0]]}")
                ratio = f"{t_old / t_new:.0f}x"
            print(f"{spec:<26} {algo:<10} {len(src):>6} {t_old:>8.2f} {t_new:>7.2f} {ratio:>8} "
                  f"{ecmp_time(spec, algo, args.ranks):>7.2f}", flush=True)
    base = build_cost("")
    print(f"\n{'topology':<26} {'hosts':>6} {'links':>7} {'build s':>8} {'RSS MB':>7}  (over {base['rss'] / 1e6:.0f} MB"
          " for the import alone)")
    for spec in args.rows:
        c = build_cost(spec)
        print(f"{spec:<26} {c['hosts']:>6} {c['links']:>7} {c['s']:>8.2f} {(c['rss'] - base['rss']) / 1e6:>7.0f}",
              flush=True)


if __name__ == "__main__":
    main()

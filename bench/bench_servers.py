"""Servers (issue 32): NCCL's hierarchical ring and tree against the flat patterns on multi-GPU servers.

Rows are functions, chosen with ``--rows`` (default: every row below, in order). Each prints its
table; ``--json FILE`` writes every row's records.

``busbw``
    Uncongested AllReduce (``--size``, default 1 GB) on 32 GPUs (4 servers x 8, placed ``first``)
    of ``rail:servers=4,gpus=8`` (8 NICs of 400 Gb/s per server, PXN) and ``fat-tree:k=8,gpus=8``
    (one shared 100 Gb/s NIC per server), side by side: ``ring`` and ``nccl-tree``, flat
    (``hierarchy=flat``) and hierarchical (server options filled from the topology, as
    ``simulate`` does). Each is simulated for one epoch (:func:`reactccl.netsim.run_simulation`,
    one ECMP port; CPU seconds of the call) and its busbw set against (a) the pattern's routed bound (the busiest link's
    bytes over its rate, :func:`reactccl.cost.link_bound.busbw_bound`, with that link's name and
    kind) and (b) the servers' bound, NCCL's ring in closed form
    (:func:`reactccl.cost.link_bound.servers_ring_busbw_bound`: ``min(C NIC, C PCIe) / max_k n_k``
    and NVLink, C the hierarchical ring's channels), whose inputs are printed first. Target: the
    hierarchical ring at >= 0.9 of (b).

Rows to come (later helpers add them as functions in :data:`ROWS`): ``react`` (REACT against the
static pattern with one congested NIC on 8 servers x 8 GPUs, gain >= +20%; and with no congestion,
0 changes) and ``scale`` (a 1024-GPU 8-channel ring and a 4096-GPU tree: CPU seconds and peak RSS).

    python bench/bench_servers.py [--rows busbw] [--size 1GB] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from reactccl.algorithms.hier import resolve_channels, server_shape
from reactccl.cost.link_bound import busbw_bound, servers_ring_busbw_bound
from reactccl.netsim import run_simulation
from reactccl.topology import parse_topology
from reactccl.topology.units import parse_bytes
from reactccl.trace import format_byte_rate

#: The topologies of the ``busbw`` row and the job on them.
BUSBW_TOPOLOGIES = ("rail:servers=4,gpus=8", "fat-tree:k=8,gpus=8")
BUSBW_RANKS = 32
#: Hierarchical ring at this fraction of the servers' bound or more (issue 32, item 3).
RING_TARGET = 0.9


def servers_bound(spec: str, ranks: int) -> tuple[float, str]:
    """The servers' busbw bound of ``ranks`` GPUs of ``spec`` (bytes/s) and its derivation as text."""
    lay = parse_topology(spec).servers
    shape = server_shape(ranks, gpus=lay.G, nics=lay.K)
    C = resolve_channels(shape, None, tree=False)
    most = -(-C // lay.K)                        # max_k n_k: channels on the busiest NIC
    bound = servers_ring_busbw_bound(shape.servers, lay.K, C, lay.nic_rate, lay.nvlink, lay.pcie)
    text = (f"{spec}: S={shape.servers} servers x G={lay.G} GPUs, K={lay.K} NIC(s) of {lay.nic_rate / 1e9:g} Gb/s, "
            f"NVLink {lay.nvlink / 8e9:g} GB/s, PCIe {lay.pcie / 8e9:g} GB/s per GPU per direction; ring C={C} "
            f"channel(s), max_k n_k={most}: min(C NIC, C PCIe) / max_k n_k = "
            f"{format_byte_rate(C * min(lay.nic_rate, lay.pcie) / most / 8)}, NVLink "
            f"{format_byte_rate(lay.nvlink / 8)} -> bound {format_byte_rate(bound)}")
    return bound, text


def row_busbw(args) -> list[dict]:
    """The ``busbw`` row (module docstring)."""
    size = parse_bytes(args.size, "--size")
    records = []
    bounds = {}
    for spec in BUSBW_TOPOLOGIES:
        bounds[spec], text = servers_bound(spec, BUSBW_RANKS)
        print(text)
    print(f"\n{'topology':<24} {'pattern':<58} {'flows':>7} {'busbw':>12} {'routed bound':>13} {'busiest link':<22} "
          f"{'of routed':>9} {'of servers':>10} {'CPU s':>6}")
    for spec in BUSBW_TOPOLOGIES:
        topo = parse_topology(spec)
        for algo in ("ring", "nccl-tree"):
            for hierarchy in ("flat", "servers"):
                t0 = time.process_time()
                res = run_simulation(algo, BUSBW_RANKS, topology=topo, size=size, epochs=1, ports=1, slowest=0,
                                     options={"hierarchy": hierarchy})
                cpu = time.process_time() - t0
                pattern = res.traces[0].pattern
                bound, link = busbw_bound(pattern, topo, res.placement, size)
                busbw = float(res.busbw[0])
                rec = {"row": "busbw", "topology": spec, "algorithm": algo, "hierarchy": hierarchy,
                       "pattern": pattern.name, "flows": pattern.num_flows, "busbw_Bps": busbw,
                       "routed_bound_Bps": bound, "busiest_link": topo.describe_link(link),
                       "busiest_kind": str(topo.link_kinds()[link]), "servers_bound_Bps": bounds[spec],
                       "of_routed": busbw / bound, "of_servers": busbw / bounds[spec], "cpu_s": cpu}
                records.append(rec)
                print(f"{spec:<24} {pattern.name:<58} {pattern.num_flows:>7} {format_byte_rate(busbw):>12} "
                      f"{format_byte_rate(bound):>13} {rec['busiest_link'] + ' ' + rec['busiest_kind']:<22} "
                      f"{rec['of_routed']:>9.3f} {rec['of_servers']:>10.3f} {cpu:>6.2f}", flush=True)
    for spec in BUSBW_TOPOLOGIES:
        hier = next(r for r in records if r["topology"] == spec and r["algorithm"] == "ring"
                    and r["hierarchy"] == "servers")
        flat = next(r for r in records if r["topology"] == spec and r["algorithm"] == "ring"
                    and r["hierarchy"] == "flat")
        verdict = "met" if hier["of_servers"] >= RING_TARGET else "MISSED"
        print(f"{spec}: hierarchical ring at {hier['of_servers']:.3f} of the servers' bound (target >= {RING_TARGET}: "
              f"{verdict}); {hier['busbw_Bps'] / flat['busbw_Bps']:.2f}x the flat ring")
    return records


#: The rows, in the order they run by default: name -> function(args) -> records.
ROWS: dict[str, Callable[[argparse.Namespace], list[dict]]] = {"busbw": row_busbw}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS),
                    help=f"rows to run (default all: {' '.join(ROWS)})")
    ap.add_argument("--size", default="1GB", help="AllReduce message of the busbw row (default 1GB)")
    ap.add_argument("--json", metavar="FILE", help="write every row's records as JSON")
    args = ap.parse_args()
    records = []
    for name in args.rows:
        print(f"== {name}")
        records += ROWS[name](args)
        print()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"bench": "bench_servers", "size": args.size, "records": records}, f, indent=1)


if __name__ == "__main__":
    main()

"""``reactccl simulate``: epochs of a collective on a simulated, congested network.

A thin layer over :func:`reactccl.netsim.run_simulation`: parse flags, show a
progress bar on a terminal, print the summary (or one JSON document). ``--pack`` sends
one message per link and round (:func:`reactccl.algorithms.torus_common.pack`, as
SP-allreduce §7.1 runs its schedules); a pattern with many flows per link and round is
slow to simulate unpacked, and the command says so before it starts.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..algorithms import generate
from ..algorithms.server_options import HIERARCHICAL, server_options
from ..algorithms.torus_common import pack
from ..experiments.metrics import default_warmup
from ..netsim import BackgroundError, SimulationError, SimulationResult, run_simulation
from ..packetsim.native import PacketSimError, PacketSimUnavailable
from ..pattern import CollectivePattern, PatternError
from ..topology import TopologyError, UnitError, parse_topology
from ..topology.graph import MAX_LINKS
from ..topology.units import parse_bytes
from ..trace import format_bytes, format_rate, format_time
from ..tuner import ReactController, ReactParams, TunerError
from ._common import check_not_input, check_outputs, deprecated_alias
from .bounds import MAX_ECMP_PORTS, MAX_EPOCHS, MAX_LIST, MAX_REPLICAS, bound_counts
from .commands import HELP
from .errors import report
from .options import SERVERS_EXAMPLE, parse_options
from .output import print_table, stdout_console
from .simulate_files import add_file_options, check_trace_size, load_pattern_arg, write_outputs

EXAMPLE = ("reactccl simulate --algorithm nccl-tree --ranks 8 --topology fat-tree:k=4 --size 20MB "
           "--epochs 100 --background pairs:x=4:p=2 --seed 1")

#: Warn before simulating a pattern with at least this many flows per epoch when packing would
#: at least halve them: every flow is a separate max-min-fair transfer, and SP-allreduce on 36
#: ranks (10,080 flows, 3.4 per link and round) takes ~14 s an epoch on fat-tree:k=8 unpacked.
SLOW_FLOWS = 5000


def _listing(items: list[str], limit: int = 8) -> str:
    more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def render(result: SimulationResult, console: Console) -> None:
    """Print a human summary of ``result``."""
    r = result
    console.print(f"[bold]{r.algorithm}[/bold] ({r.collective}), {r.num_ranks} ranks, {r.num_flows} flows/epoch "
                  f"on [bold]{r.topology}[/bold] ({r.num_hosts} hosts); message {format_bytes(r.message_bytes)}; "
                  f"{r.epochs} epochs; {'fixed routes' if r.fixed_routes else f'{r.ecmp_ports} ECMP ports'}; "
                  f"seed {r.seed}")
    names = r.placement_hosts or [f"h{h}" for h in r.placement.tolist()]
    console.print(f"placement: {_listing([f'r{i}={h}' for i, h in enumerate(names)], 16)}")
    if r.background:
        console.print(f"background: {len(r.background)} long-lived flows: "
                      f"{_listing([f'{s}->{d}' for s, d in r.background])}")
    for b in r.bulk:
        console.print(f"bulk: {b['src']}->{b['dst']} {format_bytes(b['bytes'])} every {format_time(b['period_s'])}"
                      f" from {format_time(b['phase_s'])}")
    if r.degraded:
        console.print("degraded: " + _listing([f"{l} {c / 1e9:g} Gbps" for l, c in r.degraded.items()]))
    if r.num_flows == 0:
        ranks = f"{r.num_ranks} rank" + "s" * (r.num_ranks != 1)
        console.print(f"the collective is empty (0 flows, {ranks}): nothing to time, no bandwidth to report")
        return
    s = r.stats()
    console.print(f"epoch time: p50 {format_time(s['p50_s'])}   p95 {format_time(s['p95_s'])}   "
                  f"mean {format_time(s['mean_s'])}   (min {format_time(s['min_s'])}, max {format_time(s['max_s'])})")
    console.print(f"mean algbw: {format_rate(s['algbw_Bps'])}   mean busbw: {format_rate(s['busbw_Bps'])}")
    if r.slowest:   # --slowest 0: no table, not an empty one
        print_table(console, _slowest_table(r.slowest))
    rate = r.epochs * r.num_flows / r.wall_s if r.wall_s > 0 else float("inf")
    console.print(f"simulated in {r.wall_s:.3g} s ({r.events} events, {rate:,.0f} flows/s)", style="dim")


def _slowest_table(slowest: list[dict]) -> Table:
    """The ``slowest flows`` table: one row per flow record of :attr:`SimulationResult.slowest`."""
    table = Table(title="slowest flows", title_justify="left")
    for col in ("epoch", "step", "flow", "src→dst", "hosts", "bytes", "start", "FCT"):
        table.add_column(col, justify="right" if col not in ("src→dst", "hosts") else "left")
    for f in slowest:
        table.add_row(str(f["epoch"]), str(f["step"]), str(f["flow"]), f"{f['src']}→{f['dst']}",
                      f"{f['src_host']}→{f['dst_host']}", format_bytes(f["bytes"]), format_time(f["start"]),
                      format_time(f["fct"]))
    return table


def generator_options(args) -> dict:
    """``--option`` as keyword arguments; on a ``--topology`` of servers ``ring`` and ``nccl-tree``
    get the server options from it unless given (:func:`reactccl.algorithms.server_options.server_options`,
    checked against ``--placement``). The topology, when built here, is kept as ``args.topology_obj``
    for the run.

    Raises:
        PatternError, TopologyError: a bad option, topology or placement, named.
    """
    opts = parse_options(args.option)
    spec = getattr(args, "topology", None)
    if spec is None or args.algorithm not in HIERARCHICAL:
        return opts
    args.topology_obj = topo = parse_topology(spec)
    return server_options(args.algorithm, args.ranks, topo, opts, getattr(args, "placement", "first"),
                          getattr(args, "seed", 0))


def pattern_for(args, warn: Console | None = None) -> CollectivePattern:
    """The verified pattern ``simulate`` runs: ``--algorithm`` on ``--ranks`` with ``--option``s
    (:func:`generator_options`: NCCL's hierarchy for ``ring``/``nccl-tree`` on servers),
    packed with ``--pack``: ``round`` merges the flows of one step on one (src, dst) pair
    into one message; ``instance`` merges only flows whose chunks share an instance id
    ``chunk // ranks`` (the independent reduce-scatter/allgather instances of Bucket, Swing-B,
    Trivance-B stay apart, as ``reactccl sp goodput`` packs them). Without ``--pack``, a
    pattern of :data:`SLOW_FLOWS` flows or more that packing would at least halve gets a
    warning on ``warn`` saying how many flows packing leaves (or, with ``--react``, why it
    cannot pack); not ``ring``/``nccl-tree``, whose chunk graphs on servers are NCCL's channels
    (separate connections in NCCL, which packing would merge; a 32-GPU ring of 15,872 flows
    simulates in under a second).

    Raises:
        PatternError: from :func:`reactccl.algorithms.generate`.
    """
    size = getattr(args, "size", None)      # nccl-tree slices by NCCL's chunk rule for it
    pattern = (args.pattern_obj if getattr(args, "pattern_obj", None) is not None
               else generate(args.algorithm, args.ranks, size=None if size is None else parse_bytes(size, "--size"),
                             **generator_options(args)))
    channels = getattr(args, "algorithm", None) in HIERARCHICAL   # chunk graphs are NCCL's channels: no advice to merge
    if pattern.num_flows == 0 or not (args.pack or (warn is not None and not channels
                                                    and pattern.num_flows >= SLOW_FLOWS)):
        return pattern  # nothing to pack (torus_common.pack needs a flow), or no need to look
    if args.pack == "instance":
        return pack(pattern, np.arange(pattern.num_chunks) // pattern.num_ranks)
    packed = pack(pattern)
    if args.pack:
        return packed
    if 2 * packed.num_flows <= pattern.num_flows:
        per = pattern.num_flows / packed.num_flows
        head = (f"warning: {args.algorithm} on {args.ranks} ranks has {pattern.num_flows:,} flows per epoch in "
                f"{len(np.unique(pattern.chunk_graph)):,} chunk graphs, {per:.1f} per link and round; each is "
                f"simulated on its own, which can take minutes per epoch.")
        if args.react:
            warn.print(head + " --pack (one message per link and round) cannot be used with --react, whose "
                              "swaps need the chunk graphs apart; fewer ranks or --epochs finish sooner.")
        else:
            warn.print(head + f" Add --pack to send one message per link and round ({packed.num_flows:,} flows), "
                              "as SP-allreduce §7.1 runs its schedules.")
    return pattern


def _simulate(args, pattern: CollectivePattern, label: str, controller=None) -> SimulationResult:
    err = Console(stderr=True)
    show_bar = err.is_terminal and args.epochs > 1
    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=err, transient=True, disable=not show_bar) as bar:
        task = bar.add_task("epochs", total=args.epochs)
        return run_simulation(
            pattern, topology=getattr(args, "topology_obj", None) or args.topology, size=args.size, epochs=args.epochs,
            background=args.background or [], degrade=args.degrade or None, ports=args.ports,
            seed=args.seed, placement=args.placement, slowest=args.slowest,
            progress=lambda done: bar.update(task, completed=done), controller=controller, order=args.order,
            header_efficiency=args.header_efficiency, engine="python" if args.engine == "python" else None,
            executor=_executor(args), keep_traces=bool(getattr(args, "trace", None)))


#: ``--transport`` of ``--engine packet`` when none is given (None in args: not given, so refused
#: without ``--engine packet``).
DEFAULT_TRANSPORT = "dctcp"


def _executor(args):
    """None (the fluid simulator) or a factory of packet-level clusters for ``--engine packet``."""
    if getattr(args, "engine", "fluid") != "packet":
        return None
    from functools import partial

    from ..packetsim import PacketCluster, packet_replicas  # start-up cost

    transport = getattr(args, "transport", None) or DEFAULT_TRANSPORT
    replicas = getattr(args, "replicas", None) or 1
    if replicas > 1:
        return partial(packet_replicas, replicas, transport=transport)
    return partial(PacketCluster, transport=transport)


def react_params(items: list[str] | None, seed: int) -> ReactParams:
    """``["B=6", "tau_r=0.1"]`` -> ReactParams (seed defaults to the run's seed)."""
    opts = {"seed": seed, **parse_options(items, typed=True, flag="--param")}
    unknown = sorted(set(opts) - set(ReactParams.__dataclass_fields__))
    if unknown:
        raise ValueError(f"--param {unknown[0]}: not a REACT parameter "
                         f"(known: {', '.join(ReactParams.__dataclass_fields__)})")
    return ReactParams(**opts)


def render_comparison(base: SimulationResult, react: SimulationResult, warmup: int, console: Console) -> None:
    """Baseline and REACT side by side (epochs from ``warmup`` on), then REACT's decision log."""
    w = min(warmup, base.epochs - 1)
    rows = []
    for name, fn in (("mean epoch time", np.mean), ("p50 epoch time", np.median),
                     ("p95 epoch time", lambda d: np.percentile(d, 95))):
        b, r = float(fn(base.durations[w:])), float(fn(react.durations[w:]))
        rows.append((name, format_time(b), format_time(r), f"{(r / b - 1) * 100:+.1f}%"))
    b, r = float(base.algbw[w:].mean()), float(react.algbw[w:].mean())
    rows.append(("mean algbw", format_rate(b), format_rate(r), f"{(r / b - 1) * 100:+.1f}%"))
    b, r = float(base.busbw[w:].mean()), float(react.busbw[w:].mean())
    rows.append(("mean busbw", format_rate(b), format_rate(r), f"{(r / b - 1) * 100:+.1f}%"))
    table = Table(title=f"epochs {w}..{base.epochs - 1}, same scenario and seed", title_justify="left")
    for col in ("", "baseline", "REACT", "REACT vs baseline"):
        table.add_column(col, justify="left" if not col else "right")
    for row in rows:
        table.add_row(*row)
    print_table(console, table)
    log = react.controller.decisions
    console.print(f"REACT: {_count(len(log), 'decision')}, the pattern in use changed "
                  f"{_count(react.pattern_changes, 'time')}")
    for line in decision_report(log, react.epochs):
        console.print(line, markup=False)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def decision_report(log, epochs: int) -> list[str]:
    """REACT's decision log as text (each decision's ``summary()``), a decision whose effective epoch
    is past the run's last (``epochs - 1``) said to be never applied, with no measured verdict."""
    lines = []
    for i, d in enumerate(log):
        if d.effective_epoch >= epochs:    # the summary's first line says "-> from epoch E"; the rest stays
            body = d.summary().splitlines()[1:]
            lines.append(f"[{i}] epoch {d.epoch} -> for epoch {d.effective_epoch}: {d.kind}, never applied "
                         f"(the run ended with epoch {epochs - 1})")
            lines += [x for x in body if "measured" not in x and "REVERTED" not in x]
        else:
            lines.append(f"[{i}] {d.summary()}")
    return lines


def list_links(topology: str, console: Console, as_json: bool = False) -> None:
    """Print every directed link of ``topology`` (a spec) with its cable id and kind (nvlink, pcie,
    nic, fabric), for ``--degrade``; ``as_json``: one JSON document (schema ``reactccl.links/1``)."""
    topo = parse_topology(topology)
    rows = topo.link_rows()
    if as_json:
        json.dump({"schema": "reactccl.links/1", "topology": topo.name, "links": rows}, sys.stdout)
        sys.stdout.write("\n")
        return
    table = Table(title=f"{topo.name}: {topo.num_links} links in {len(topo.cables())} cables "
                        "(--degrade link=ID is one direction, cable=ID both)", title_justify="left")
    for col in ("link", "cable", "from", "to", "kind", "capacity", "latency"):
        table.add_column(col, justify="right" if col in ("link", "cable") else "left")
    for row in rows:
        table.add_row(str(row["link"]), str(row["cable"]), str(row["src"]), str(row["dst"]), row["kind"],
                      f"{row['capacity'] / 1e9:g} Gbps", format_time(row["latency"]))
    print_table(console, table)


def _check_args(args) -> None:
    """ValueError naming a flag that is missing, out of range, or given without the flag it
    needs (argparse cannot say it)."""
    for flag in ("algorithm", "ranks"):
        if getattr(args, flag) is None:
            raise ValueError(f"--{flag}: required (unless --list-links)")
    parse_bytes(args.size, "--size")   # named as the user typed it (run_simulation says "size")
    if args.seed < 0:
        raise ValueError(f"--seed: expected a non-negative integer, got {args.seed}")
    if args.slowest < 0:
        raise ValueError(f"--slowest: expected a non-negative integer, got {args.slowest}")
    if not args.react:
        for flag, value in (("--warmup", args.warmup), ("--param", args.param)):
            if value is not None:
                raise ValueError(f"{flag}: only used with --react (it sets up the REACT comparison); "
                                 "add --react or leave it out")
    elif args.pack:
        raise ValueError("--pack: cannot be used with --react: packing merges every chunk graph into one "
                         "message per link and round, and REACT's transforms swap positions within each "
                         "chunk graph; leave out --pack (or --react)")
    if getattr(args, "transport", None) is not None and getattr(args, "engine", "fluid") != "packet":
        raise ValueError(f"--transport: only used with --engine packet (given: {args.transport}); add --engine "
                         "packet or leave it out")
    replicas = getattr(args, "replicas", None)   # None: not given
    if replicas is not None and (replicas < 1 or getattr(args, "engine", "fluid") != "packet"):
        raise ValueError(f"--replicas: an integer >= 1, only used with --engine packet (got {args.replicas})")
    check_outputs(save_pattern=args.save_pattern, plot=args.plot, timeline=args.timeline, trace=args.trace)
    check_not_input({"--pattern": getattr(args, "pattern", None)}, save_pattern=args.save_pattern, plot=args.plot,
                    timeline=args.timeline, trace=args.trace)
    if args.warmup is None:  # the paper's 25, or a quarter of a short run
        args.warmup = default_warmup(args.epochs)
    elif args.react and not 0 <= args.warmup < args.epochs:
        raise ValueError(f"--warmup: must satisfy 0 <= warmup < epochs ({args.epochs}), got {args.warmup}")


def _cmd_simulate(args) -> int:
    if args.list_links:
        try:
            list_links(args.topology, stdout_console(), as_json=args.json)
        except (TopologyError, UnitError) as exc:
            return report(exc)
        return 0
    try:
        load_pattern_arg(args)
        _check_args(args)
        pattern = pattern_for(args, Console(stderr=True, highlight=False, soft_wrap=True))
        if args.trace:
            check_trace_size(pattern.num_flows, args.epochs, 2 if args.react else 1)
        if args.react:
            params = react_params(args.param, args.seed)
            base = _simulate(args, pattern, "baseline")
            react = _simulate(args, pattern, "REACT", controller=lambda p: ReactController(p, params))
        else:
            result = _simulate(args, pattern, "simulating")
    except (PatternError, TopologyError, BackgroundError, UnitError, SimulationError, TunerError,
            ValueError, PacketSimUnavailable, PacketSimError) as exc:
        return report(exc)
    console = stdout_console()
    if args.react:
        if args.json:
            doc = {"schema": "reactccl.simulate-react/1", "warmup": args.warmup, "baseline": base.to_dict(),
                   "react": react.to_dict(), "params": params.to_dict(),
                   "decisions": [d.to_dict() | {"applied": d.effective_epoch < react.epochs}
                                 for d in react.controller.decisions]}
            json.dump(doc, sys.stdout)
            sys.stdout.write("\n")
        else:
            console.print("[bold]REACT run:[/bold]")
            render(react, console)
            render_comparison(base, react, args.warmup, console)
        return write_outputs(args, base=base, react=react)
    if args.json:
        json.dump(result.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        render(result, console)
    return write_outputs(args, result=result)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``simulate``."""
    p = sub.add_parser(
        "simulate", help=HELP["simulate"],
        description="Flow-level simulation of a collective: max-min fair links, per-hop latency, ECMP, "
                    "background traffic and degraded links. Example: " + EXAMPLE + ". On multi-GPU servers: "
                    + SERVERS_EXAMPLE + ".")
    p.add_argument("--algorithm", "-a", help="registered generator, e.g. nccl-tree, ring (required)")
    p.add_argument("--ranks", "-n", type=int, help="number of ranks (required)")
    p.add_argument("--option", "-O", action="append", metavar="KEY=VALUE",
                   help="generator option (repeatable); on a topology of servers ring and nccl-tree are NCCL's "
                        "hierarchical patterns, their servers=, gpus=, nics= taken from the topology (the ranks "
                        "fill whole servers): -O channels=C sets the channels (default one per NIC, two for the "
                        "tree), -O hierarchy=flat gives the flat pattern on the same GPUs")
    p.add_argument("--topology", "-t", default="fat-tree:k=4",
                   help="switched (ECMP, links 100G and 1us unless given): star:hosts=18, fat-tree:k=4, "
                        "leaf-spine:leaves=4,spines=2,hosts=4, alibaba, full-mesh:tors=4,hosts=2; direct "
                        "fabrics of SP-allreduce (fixed geometry routes, hosts n0.. row-major, links 400G and "
                        "400ns per hop unless given): torus:AxB[xC] (sides >= 3), hyperx:NxN, "
                        "spineleaf:LEAVESxQ; dragonfly:a=4,p=2,h=2 (minimal local-global-local routes, 100G, 1us); "
                        "add ,rate=100G,latency=1us to any. Multi-GPU servers (a GPU per host, NVLink inside a "
                        "server, NICs between): rail:servers=S,gpus=G[,nics=K,spines=,leaves_per_rail=,storage=,"
                        "pxn=0] (rail-optimized: NIC r of every server on rail r's leaf, spines above; one 400G "
                        "NIC per GPU, PXN on) or gpus=G[,nics=K] on a switched builder, e.g. fat-tree:k=8,gpus=8 "
                        "(one shared NIC per server at the fabric rate); NVLink 450GB/s and PCIe 64GB/s per GPU "
                        "per direction unless nvlink=/pcie= (3600G or 450GB/s) (default fat-tree:k=4) "
                        f"[at most {MAX_LINKS} directed links]")
    p.add_argument("--size", "-s", default="20MB", help="message size, e.g. 20MB (decimal) or 64MiB (default 20MB)")
    p.add_argument("--epochs", "-e", type=int, default=100, help="epochs to simulate (default 100)")
    p.add_argument("--background", "-b", action="append", metavar="SPEC",
                   help="into:3:p=2 | out:3:p=1 | pairs:x=4:p=2[:dir=in] | flow:src=h12,dst=r3[,count=2] | "
                        "bulk:src=h12,dst=h3,bytes=5MB,period=2ms[,phase=1ms] (repeatable; a bulk must offer "
                        "bytes*8/period below its path's capacity: 5MB/2ms = 20 Gbps)")
    p.add_argument("--degrade", "-d", action="append", metavar="SPEC",
                   help="random:k=2:rate=30G (k random cables, both directions) | job:k=1:rate=30G (k random "
                        "cables on the job's own paths, so the job surely meets them) | cable=5:rate=30G (both "
                        "directions of cable 5) | link=12:rate=30G or link=s0nic1->r1l0:rate=30G (one directed "
                        "link) | nic:server=2,nic=1,rate=100G (a server's NIC cable); random and job draw network "
                        "cables only (no NVLink or PCIe); rate <= the link's capacity; ids from --list-links "
                        "(repeatable)")
    p.add_argument("--list-links", action="store_true",
                   help="print the links of --topology with their link and cable ids and kind (nvlink, pcie, "
                        "nic, fabric), then exit (with --json: one JSON document)")
    p.add_argument("--ecmp-ports", dest="ports", type=int, default=4,
                   help="ECMP ports per flow, one drawn per epoch (default 4; no effect on fixed-route fabrics)")
    deprecated_alias(p, "--ports", "--ecmp-ports")  # demo's name; one name per option across commands
    p.add_argument("--seed", type=int, default=0, help="seed for ports, placement and background (default 0)")
    p.add_argument("--placement", default="first", help="first | random | host list like 0,5,9 (default first)")
    p.add_argument("--slowest", type=int, default=5, help="how many slowest flows to list (default 5; 0: no table)")
    p.add_argument("--react", action="store_true",
                   help="also run REACT on the same seeded scenario and show both side by side")
    p.add_argument("--warmup", type=int, default=None,
                   help="with --react: epochs left out of the comparison, 0 <= warmup < epochs (default 25 as "
                        "in paper §7.3, or epochs//4 for runs of 25 epochs or fewer)")
    p.add_argument("--param", "-P", action="append", metavar="NAME=VALUE",
                   help="with --react: a REACT parameter of reactccl.tuner.ReactParams, e.g. B=6 (repeatable)")
    p.add_argument("--pack", nargs="?", const="round", choices=["round", "instance"],
                   help="send one message per link and round: flows of one step on one src->dst pair merge "
                        "(as SP-allreduce §7.1 runs its schedules); much faster for SP, Bucket, Swing and "
                        "Trivance patterns. '--pack instance' merges only within instances (chunk // ranks), "
                        "keeping those of Bucket/Swing-B/Trivance-B independent as 'sp goodput' does. A packed "
                        "message waits for all its chunks and takes one ECMP path, so times can differ from "
                        "the unpacked run; the chunk graphs become one, so not with --react")
    p.add_argument("--order", choices=["step", "data"], default="step",
                   help="execution order: 'step' (default) sends a rank's flows of one chunk graph in step "
                        "order (a send waits for its data and for the rank's sends of earlier steps in that "
                        "chunk graph to leave it; chunk graphs run concurrently, like NCCL channels); 'data' "
                        "starts every send as soon as its data is in, whatever its step")
    p.add_argument("--header-efficiency", type=_fraction, default=1.0, metavar="E",
                   help="payload bytes per byte on the wire, 0 < E <= 1, as a number or a ratio: a flow of B "
                        "bytes puts B/E bytes on its links; times, algbw and busbw count payload. TCP over "
                        "1500-byte-MTU Ethernet carries 1448 payload bytes per 1538 on the wire (1448/1538); "
                        "default 1 (no headers: the alpha-beta figures stay exact)")
    p.add_argument("--engine", choices=["fluid", "python", "packet"], default="fluid",
                   help="fluid: flow-level max-min simulation on the compiled core (default); python: the same "
                        "model on the pure-Python reference engine (slow; to cross-check); packet: ns-3 packet level, TCP and "
                        "queues per --transport, 4 persistent connections per flow on the same ECMP paths "
                        "(needs pip install 'reactccl[ns3]'; seconds per epoch)")
    p.add_argument("--transport", choices=["dctcp", "dctcp_red", "default"], default=None,
                   help=f"with --engine packet: {DEFAULT_TRANSPORT} (REACT §7.3: DCTCP, RED/ECN 32/60 packets, 32 MB "
                        "buffers, ACKs first; default), dctcp_red (the reference scenarios' DCTCP/RED 20/60) "
                        "or default (ns-3's default TCP and qdisc)")
    p.add_argument("--replicas", type=int, default=None, metavar="W",
                   help="with --engine packet: run the epochs on W copies of the network, one process (core) "
                        "each, W-1 epochs ahead on the same pattern; each copy keeps its own TCP state, so "
                        "results are not bit-identical to W=1 (default 1; see reactccl.packetsim.replicas)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the summary")
    add_file_options(p)
    bound_counts(p, {"--epochs": MAX_EPOCHS, "--ecmp-ports": MAX_ECMP_PORTS, "--slowest": MAX_LIST,
                     "--warmup": MAX_EPOCHS, "--replicas": MAX_REPLICAS})
    p.set_defaults(func=_cmd_simulate)


def _fraction(text: str) -> float:
    """``0.94`` or ``1448/1538`` as a float in (0, 1] (argparse type for --header-efficiency)."""
    num, slash, den = str(text).partition("/")
    try:
        v = float(num) / float(den) if slash else float(num)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a number or a ratio like 1448/1538, got {text!r}") from None
    if not 0.0 < v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1] (payload bytes per wire byte), got {text!r}")
    return v

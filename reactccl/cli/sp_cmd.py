"""``reactccl sp``: SP-allreduce and torus schedules — deficiency metrics and goodput experiments.

* ``reactccl sp metrics ALG --fabric torus:8x8 [--opt k=3] [--size 1MiB]`` — rounds S, Ψ, Θ, Ω,
  Q and the α-β time αS + βQ (§2.2; 400 Gb/s and α = 400 ns by default, §7.1) of one
  schedule on a torus, HyperX or spine-leaf fabric. An SP generator on a fabric it is not
  built for is refused (naming the right one) unless ``--force``; schedules estimated above
  ``--max-memory`` are refused before generating.
* ``reactccl sp ksp --fabric torus:8x8`` — W(T), Θ, Ω and rounds of k-SP-allreduce per k.
* ``reactccl sp goodput NAME [--sizes 64KiB,1MiB] [--engine netsim|model|auto] [--out DIR]`` — one
  of the paper's goodput experiments (see :mod:`reactccl.experiments.sp_figures`).

A thin layer over :func:`reactccl.cost.deficiency` and
:func:`reactccl.experiments.sp_figures.run_experiment`.
"""

from __future__ import annotations

import argparse
import json
import math

from ..algorithms import generate
from ..algorithms.torus_common import pack
from ..cost.deficiency import deficiency, round_times
from ..cost.symmetric import compact_deficiency
from ..experiments.sp_goodput import VERIFY_LIMIT
from ..pattern import PatternError
from ..topology import UnitError, parse_rate, parse_size, parse_time

EXAMPLE = "reactccl sp metrics sp-allreduce --fabric torus:8x8 ; reactccl sp goodput sp-square --sides 8"


def _fabric(spec: str):
    from ..experiments.sp_goodput import Fabric
    try:
        kind, dims = spec.split(":")
        shape = tuple(int(v) for v in dims.lower().split("x"))
    except ValueError:
        raise PatternError(f"--fabric: expected KIND:AxB (torus:8x8, hyperx:8x8, spineleaf:LEAVESxQ), got {spec!r}") from None
    return Fabric(kind, shape)  # ValueError on a wrong shape for the kind


def _options(items: list[str]) -> dict:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise PatternError(f"--opt: expected KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


#: The fabric each SP generator is built for (§3, §6.2, §6.3). The baselines (Bucket, Swing,
#: Trivance, rings, RD) run on a torus layout of the ranks on any fabric, as in the paper's §7.6.
BUILT_FOR = {"sp-allreduce": "torus", "sp-allreduce-2h1": "torus", "k-sp-allreduce": "torus",
             "sp-hyperx": "hyperx", "sp-spineleaf": "spineleaf"}
SP_FOR = {"torus": "sp-allreduce (or k-sp-allreduce, sp-allreduce-2h1)", "hyperx": "sp-hyperx",
          "spineleaf": "sp-spineleaf"}
BYTES_PER_FLOW = 140  # measured peak of generate + deficiency: ~131 B/flow (16x16 and 4x4x4 SP-allreduce)


def estimate_flows(name: str, p: int, d: int) -> int:
    """Flows a generator makes for ``p`` ranks on a ``d``-dimensional layout, before packing
    (measured on 4x4, 8x8, 9x9, 4x4x4). Bandwidth-optimal tree/bucket schedules send each of
    ``c·p`` chunks ``2(p-1)`` times (c = 2d for SP, k-SP, Bucket, Swing-B, torus ring; d for
    Trivance-B; 1 for rings and spine-leaf SP); latency-optimal ones send ``O(p log p)``.
    Unknown generators get the largest factor, 2d."""
    lg = max(1, math.ceil(math.log2(max(p, 2))))
    full = 2 * p * (p - 1)
    table = {"swing-l": 2 * d * p * lg, "trivance-l": 2 * d * p * lg, "rd-allreduce": p * lg,
             "recursive-doubling": p * lg, "rabenseifner": 2 * p * lg, "trivance-b": d * full,
             "ring": full, "sp-spineleaf": full}
    return table.get(name, 2 * d * full)


def _size_guard(name: str, fab, max_memory: str) -> None:
    est = estimate_flows(name, fab.num_nodes, 1 if fab.kind == "spineleaf" else len(fab.shape))
    need, limit = est * BYTES_PER_FLOW, float(parse_size(max_memory))
    if need > limit:
        raise PatternError(
            f"{name} on {fab.label} ({fab.num_nodes} nodes) would materialise about {est:.3g} flows, "
            f"~{need / 2 ** 30:.3g} GiB (limit --max-memory {max_memory}). The metrics route every flow; for "
            "fabrics this large only generators with a compact form are timed, by symmetry (on tori: "
            "sp-allreduce, k-sp-allreduce, bucket, swing-b, trivance-b; reactccl.algorithms.compact)")


def _compact(name: str, fab, opts: dict):
    """The compact (symmetry) form of ``name`` on a torus beyond the exact-check size, else None."""
    from ..algorithms.compact import COMPACT_GENERATORS, compact_schedule
    if fab.kind != "torus" or name not in COMPACT_GENERATORS or fab.num_nodes <= VERIFY_LIMIT:
        return None
    try:
        return compact_schedule(name, fab.num_nodes, shape=fab.shape, **opts)
    except PatternError:
        return None


def _fabric_note(args, fab) -> str | None:
    """A note when an SP generator runs on a fabric it is not built for (None if it is)."""
    meant = BUILT_FOR.get(args.algorithm)
    if meant is None or meant == fab.kind:
        return None
    return (f"{args.algorithm} is built for {meant} fabrics; its Ψ/Θ/Ω on {fab.label} say nothing about SP-allreduce "
            f"there — the generator for {fab.kind} is {SP_FOR[fab.kind]}")


def _metrics(args) -> int:
    fab = _fabric(args.fabric)
    note = _fabric_note(args, fab)
    if note and not args.force:
        raise PatternError(note + " (--force computes it anyway)")
    cs = _compact(args.algorithm, fab, _options(args.opt))
    if cs is None:
        _size_guard(args.algorithm, fab, args.max_memory)
    size, rate = float(parse_size(args.size)), float(parse_rate(args.link_rate))
    alpha, hop = float(parse_time(args.alpha)), float(parse_time(args.hop_latency))
    if size <= 0 or rate <= 0 or alpha < 0 or hop < 0:
        raise PatternError("--size and --link-rate must be > 0, --alpha and --hop-latency >= 0")
    opts = _options(args.opt)
    if args.algorithm not in ("ring", "rd-allreduce", "recursive-doubling", "rabenseifner", "sp-spineleaf"):
        opts.setdefault("shape", fab.shape)
    if args.algorithm == "sp-spineleaf":
        opts.setdefault("q", fab.shape[1])
    if cs is not None:
        d, chunks, flows, how = compact_deficiency(cs), cs.num_chunks, cs.num_flows, " (by symmetry)"
    else:
        pat = generate(args.algorithm, fab.num_nodes, check=fab.num_nodes <= 1024, **opts)
        d = deficiency(pack(pat) if args.packed else pat, fab.geometry())
        chunks, flows, how = pat.num_chunks, pat.num_flows, ""
    beta = size * 8.0 / rate  # seconds to send the whole message over one link
    t_ab = d.time(alpha, beta)
    t_rounds = float(round_times(d, size, rate, hop).sum())
    doc = dict(algorithm=args.algorithm, fabric=fab.label, chunks=chunks, flows=flows, by_symmetry=cs is not None,
               **{k: v for k, v in d.as_dict().items() if k not in ("max_load", "max_hops")},
               message_bytes=size, link_rate_bps=rate, alpha_s=alpha, hop_latency_s=hop,
               time_alpha_beta_s=t_ab, time_round_model_s=t_rounds, note=note)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        if note:
            print(f"note: {note}")
        print(f"{args.algorithm} on {fab.label}: {chunks} chunks, {flows} flows{how}, S = {d.rounds} rounds")
        print(f"  Vol_abs = {d.vol_abs:.4g} N, Vol_phys = {d.vol_phys:.4g} N, Q = {d.q:.4g} N")
        print(f"  Psi = {d.psi:.4f}  Theta = {d.theta:.4f}  Omega = {d.omega:.4f}")
        print(f"  time for N = {args.size} ({size:.0f} B) at {rate / 1e9:g} Gb/s: alpha*S + beta*Q = {alpha * 1e9:g} ns x {d.rounds}"
              f" + {beta * 1e6:.4g} us/N x {d.q:.4g} N = {t_ab * 1e6:.4g} us;"
              f" round model (+ longest route x {hop * 1e9:g} ns per round) {t_rounds * 1e6:.4g} us")
    return 0


def _ksp(args) -> int:
    from ..algorithms.kspt import ksp_tree
    from ..topology.torus import TorusGeometry
    fab = _fabric(args.fabric)
    if fab.kind != "torus":
        raise PatternError("sp ksp: k-SP trees are built on tori (--fabric torus:NxN)")
    if fab.num_nodes <= VERIFY_LIMIT or len(set(fab.shape)) != 1:
        _size_guard("k-sp-allreduce", fab, args.max_memory)  # beyond: by symmetry, nothing materialised
    geom = TorusGeometry(fab.shape)
    ks = [int(k) for k in args.ks.split(",")] if args.ks else list(range(1, geom.diameter + 1))
    print(f"k-SP-allreduce on {fab.label} (p = {geom.num_nodes}, H = {geom.diameter})")
    print(f"  {'k':>3s} {'depth':>5s} {'rounds':>6s} {'W(T)':>7s} {'Theta':>7s} {'Omega':>7s}  layer distances")
    for k in ks:
        parent, L, W = ksp_tree(geom, k)
        cs = _compact("k-sp-allreduce", fab, {"k": k})
        if cs is None:
            pat = generate("k-sp-allreduce", geom.num_nodes, check=geom.num_nodes <= VERIFY_LIMIT, k=k,
                           shape=fab.shape)
        d = compact_deficiency(cs) if cs is not None else deficiency(pat, geom)
        print(f"  {k:3d} {len(L) - 1:5d} {d.rounds:6d} {W:7d} {d.theta:7.3f} {d.omega:7.3f}  {L}")
    return 0


def _goodput(args) -> int:
    from ..experiments.sp_figures import run_experiment
    kw = dict(engine=args.engine, quick=args.quick)
    if args.sizes:
        kw["sizes"] = [int(parse_size(s)) for s in args.sizes.split(",")]
    if args.sides:
        kw["sides"] = [int(s) for s in args.sides.split(",")]
    if args.values:
        conv = parse_rate if args.name == "sp-linkrate" else parse_time
        kw["values"] = [float(conv(v)) for v in args.values.split(",")]
    if args.alpha:
        kw["alpha"] = float(parse_time(args.alpha))
    if args.families:
        kw["families"] = args.families.split(",")
    if args.ks:
        kw["ks"] = [int(k) for k in args.ks.split(",")]
    if args.shape:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shape.split(",")]
        kw["shapes"], kw["shape"] = shapes, shapes[0]
    print(run_experiment(args.name, args.out, **kw))
    return 0


def _run(args) -> int:
    try:
        return args.sp_func(args)
    except (PatternError, UnitError, ValueError) as e:
        print(f"error: {e}")
        return 2


def add_parser(subparsers) -> None:
    """Add ``reactccl sp`` with its ``metrics`` and ``goodput`` subcommands."""
    p = subparsers.add_parser("sp", help="SP-allreduce: deficiency metrics and goodput experiments",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=f"example: {EXAMPLE}")
    sub = p.add_subparsers(dest="sp_command", metavar="SUBCOMMAND")
    sub.required = True
    m = sub.add_parser("metrics", help="rounds, Ψ, Θ, Ω of a schedule on a fabric")
    m.add_argument("algorithm", help="generator name, e.g. sp-allreduce, k-sp-allreduce, bucket, swing-b")
    m.add_argument("--fabric", default="torus:8x8", help="torus:AxB[xC], hyperx:NxN or spineleaf:LEAVESxQ")
    m.add_argument("--opt", action="append", metavar="KEY=VALUE", help="generator option (repeatable), e.g. k=3")
    m.add_argument("--packed", action="store_true", help="pack flows per (round, src, dst) first (same metrics)")
    m.add_argument("--json", action="store_true", help="print one JSON document")
    m.add_argument("--size", default="1MiB", help="message size N for the time (default 1MiB)")
    m.add_argument("--link-rate", default="400Gbps", help="link rate, 1/beta (default 400Gbps, §7.1)")
    m.add_argument("--alpha", default="400ns", help="alpha per round in alpha*S + beta*Q (default 400ns, one hop of §7.1)")
    m.add_argument("--hop-latency", default="400ns", help="per-hop latency of the round model (default 400ns, §7.1)")
    m.add_argument("--force", action="store_true", help="measure an SP generator on a fabric it is not built for")
    m.add_argument("--max-memory", default="4GiB", help="refuse schedules estimated above this (default 4GiB)")
    m.set_defaults(func=_run, sp_func=_metrics)
    k = sub.add_parser("ksp", help="W(T), Θ, Ω and rounds of k-SP-allreduce for each k")
    k.add_argument("--fabric", default="torus:8x8", help="torus:NxN")
    k.add_argument("--ks", help="comma-separated k (default 1..H)")
    k.add_argument("--max-memory", default="4GiB", help="refuse fabrics estimated above this (default 4GiB)")
    k.set_defaults(func=_run, sp_func=_ksp)
    g = sub.add_parser("goodput", help="a goodput experiment of the paper (§7)")
    g.add_argument("name", choices=["sp-square", "sp-linkrate", "sp-latency", "sp-rect", "sp-hyperx", "sp-spineleaf"])
    g.add_argument("--engine", default="netsim", choices=["netsim", "model", "auto"],
                   help="flow-level simulator, round-synchronous alpha-beta model, or auto (netsim up to "
                        "256 nodes, the model beyond; e.g. --sides 8,16,32,64 for all of Fig. 3)")
    g.add_argument("--sizes", help="comma-separated message sizes (default 64KiB..256MiB)")
    g.add_argument("--sides", help="sp-square: comma-separated n of n x n tori (default 8,16)")
    g.add_argument("--values", help="sp-linkrate: rates (e.g. 100Gbps,400Gbps); sp-latency: latencies (200ns,...)")
    g.add_argument("--shape", help="sp-rect: shapes like 64x16,128x8; sp-hyperx/sp-spineleaf: one shape")
    g.add_argument("--alpha", help="per-round overhead for the model engine, e.g. 1us (default 0)")
    g.add_argument("--families", help="sp-rect/sp-hyperx/sp-spineleaf: families to run, e.g. SP,Bucket,Swing")
    g.add_argument("--ks", help="k-SP depth bounds to try, e.g. 1,2,3,5,8 (default 1..H)")
    g.add_argument("--quick", action="store_true", help="small configuration (tiny fabric, 3 sizes; seconds)")
    g.add_argument("--out", default="results/sp", help="output folder for JSON and PNG (default results/sp)")
    g.set_defaults(func=_run, sp_func=_goodput)

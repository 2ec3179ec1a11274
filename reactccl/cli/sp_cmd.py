"""``reactccl sp``: SP-allreduce and torus schedules — deficiency metrics and goodput experiments.

* ``reactccl sp metrics ALG --fabric torus:8x8 [--opt k=3]`` — rounds S, Ψ, Θ, Ω, Q and the
  model time of one schedule on a torus, HyperX or spine-leaf fabric.
* ``reactccl sp ksp --fabric torus:8x8`` — W(T), Θ, Ω and rounds of k-SP-allreduce per k.
* ``reactccl sp goodput NAME [--sizes 64KiB,1MiB] [--engine netsim|model] [--out DIR]`` — one
  of the paper's goodput experiments (see :mod:`reactccl.experiments.sp_figures`).

A thin layer over :func:`reactccl.cost.deficiency` and
:func:`reactccl.experiments.sp_figures.run_experiment`.
"""

from __future__ import annotations

import argparse
import json

from ..algorithms import generate
from ..algorithms.torus_common import pack
from ..cost.deficiency import deficiency
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
    return Fabric(kind, shape)


def _options(items: list[str]) -> dict:
    out = {}
    for it in items or []:
        if "=" not in it:
            raise PatternError(f"--opt: expected KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        out[k] = int(v) if v.lstrip("-").isdigit() else v
    return out


def _metrics(args) -> int:
    fab = _fabric(args.fabric)
    opts = _options(args.opt)
    if args.algorithm not in ("ring", "rd-allreduce", "recursive-doubling", "rabenseifner", "sp-spineleaf"):
        opts.setdefault("shape", fab.shape)
    if args.algorithm == "sp-spineleaf":
        opts.setdefault("q", fab.shape[1])
    pat = generate(args.algorithm, fab.num_nodes, check=fab.num_nodes <= 1024, **opts)
    d = deficiency(pack(pat) if args.packed else pat, fab.geometry())
    doc = dict(algorithm=args.algorithm, fabric=fab.label, chunks=pat.num_chunks, flows=pat.num_flows,
               **{k: v for k, v in d.as_dict().items() if k not in ("max_load", "max_hops")})
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print(f"{args.algorithm} on {fab.label}: {pat.num_chunks} chunks, {pat.num_flows} flows, S = {d.rounds} rounds")
        print(f"  Vol_abs = {d.vol_abs:.4g} N, Vol_phys = {d.vol_phys:.4g} N, Q = {d.q:.4g} N")
        print(f"  Psi = {d.psi:.4f}  Theta = {d.theta:.4f}  Omega = {d.omega:.4f}")
    return 0


def _ksp(args) -> int:
    from ..algorithms.kspt import ksp_tree
    from ..topology.torus import TorusGeometry
    fab = _fabric(args.fabric)
    if fab.kind != "torus":
        raise PatternError("sp ksp: k-SP trees are built on tori (--fabric torus:NxN)")
    geom = TorusGeometry(fab.shape)
    ks = [int(k) for k in args.ks.split(",")] if args.ks else list(range(1, geom.diameter + 1))
    print(f"k-SP-allreduce on {fab.label} (p = {geom.num_nodes}, H = {geom.diameter})")
    print(f"  {'k':>3s} {'depth':>5s} {'rounds':>6s} {'W(T)':>7s} {'Theta':>7s} {'Omega':>7s}  layer distances")
    for k in ks:
        parent, L, W = ksp_tree(geom, k)
        pat = generate("k-sp-allreduce", geom.num_nodes, check=geom.num_nodes <= 256, k=k, shape=fab.shape)
        d = deficiency(pat, geom)
        print(f"  {k:3d} {len(L) - 1:5d} {pat.num_steps:6d} {W:7d} {d.theta:7.3f} {d.omega:7.3f}  {L}")
    return 0


def _goodput(args) -> int:
    from ..experiments.sp_figures import run_experiment
    kw = dict(engine=args.engine)
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
    m.set_defaults(func=_run, sp_func=_metrics)
    k = sub.add_parser("ksp", help="W(T), Θ, Ω and rounds of k-SP-allreduce for each k")
    k.add_argument("--fabric", default="torus:8x8", help="torus:NxN")
    k.add_argument("--ks", help="comma-separated k (default 1..H)")
    k.set_defaults(func=_run, sp_func=_ksp)
    g = sub.add_parser("goodput", help="a goodput experiment of the paper (§7)")
    g.add_argument("name", choices=["sp-square", "sp-linkrate", "sp-latency", "sp-rect", "sp-hyperx", "sp-spineleaf"])
    g.add_argument("--engine", default="netsim", choices=["netsim", "model"],
                   help="flow-level simulator or round-synchronous alpha-beta model")
    g.add_argument("--sizes", help="comma-separated message sizes (default 64KiB..256MiB)")
    g.add_argument("--sides", help="sp-square: comma-separated n of n x n tori (default 8,16)")
    g.add_argument("--values", help="sp-linkrate: rates (e.g. 100Gbps,400Gbps); sp-latency: latencies (200ns,...)")
    g.add_argument("--shape", help="sp-rect: shapes like 64x16,128x8; sp-hyperx/sp-spineleaf: one shape")
    g.add_argument("--alpha", help="per-round overhead for the model engine, e.g. 1us (default 0)")
    g.add_argument("--families", help="sp-rect/sp-hyperx/sp-spineleaf: families to run, e.g. SP,Bucket,Swing")
    g.add_argument("--ks", help="k-SP depth bounds to try, e.g. 1,2,3,5,8 (default 1..H)")
    g.add_argument("--out", default="results/sp", help="output folder for JSON and PNG (default results/sp)")
    g.set_defaults(func=_run, sp_func=_goodput)

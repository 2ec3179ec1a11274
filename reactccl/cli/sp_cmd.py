"""``reactccl sp``: SP-allreduce and torus schedules — deficiency metrics and goodput experiments.

* ``reactccl sp metrics ALG --fabric torus:8x8 [--option k=3] [--size 1MiB]`` — rounds S, Ψ, Θ, Ω,
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
import sys

from ..algorithms import generate
from ..algorithms.torus_common import pack
from ..cost.deficiency import deficiency, round_times
from ..cost.symmetric import compact_deficiency
from ..experiments.sp_figures import DEFAULT_OUT, OPTIONS, fmt_size
from ..experiments.sp_goodput import MAX_FABRIC_NODES, VERIFY_LIMIT, check_tree_sweep
from ..pattern import PatternError
from ..topology import UnitError
from ..topology.units import parse_bytes, parse_rate, parse_size, parse_time
from ._common import deprecated_alias
from .commands import HELP
from .errors import progress, report

EXAMPLE = "reactccl sp metrics sp-allreduce --fabric torus:8x8 ; reactccl sp goodput sp-square --sides 8"


def _fabric(spec: str):
    from ..experiments.sp_goodput import Fabric  # start-up cost
    try:
        kind, dims = spec.split(":")
        shape = tuple(int(v) for v in dims.lower().split("x"))
    except ValueError:
        raise PatternError(f"--fabric: expected KIND:AxB (torus:8x8, hyperx:8x8, spineleaf:LEAVESxQ), got {spec!r}") from None
    return Fabric(kind, shape)  # ValueError on a wrong shape for the kind


def _options(items: list[str]) -> dict:
    """``--option KEY=VALUE`` items as ``{KEY: "VALUE"}``; :func:`reactccl.algorithms.generate`
    converts the strings by the generator's annotations."""
    out = {}
    for it in items or []:
        k, eq, v = it.partition("=")
        if not eq or not k.strip():
            raise PatternError(f"--option: expected KEY=VALUE, got {it!r}")
        out[k.strip()] = v.strip()
    return out


def _int_list(text: str, option: str, least: int = 1) -> list[int]:
    """A comma-separated list of integers >= ``least`` given to ``option``."""
    out = []
    for v in text.split(","):
        try:
            out.append(int(v))
        except ValueError:
            raise PatternError(f"{option}: expected comma-separated integers, got {v.strip()!r} in {text!r}") from None
        if out[-1] < least:
            raise PatternError(f"{option}: every value must be >= {least}, got {out[-1]} in {text!r}")
    return out


def _fabric_options(name: str, fab, opts: dict) -> dict:
    """``opts`` plus what the fabric fixes, for the generators that take it (by their signature):
    ``shape`` (torus/HyperX sides, or the spine-leaf's leaves x q grid for the torus baselines)
    and ``q`` (spine-leaf hosts per leaf). A ``dims`` or ``shape`` option that contradicts the
    fabric is an error; one that agrees is dropped."""
    import inspect  # start-up cost

    from ..algorithms.registry import get
    params = inspect.signature(get(name).func).parameters
    opts = dict(opts)
    if "dims" in opts and "shape" in params:
        if str(opts["dims"]).strip() != str(len(fab.shape)):
            raise PatternError(f"--option dims={opts['dims']}: --fabric {fab.label} has {len(fab.shape)} dimensions; "
                               "the fabric sets the shape (use e.g. --fabric torus:4x4x4 for 3 dimensions)")
        del opts["dims"]
    if "shape" in opts:
        raise PatternError(f"--option shape=...: the shape comes from --fabric ({fab.label})")
    if "shape" in params:
        opts["shape"] = fab.shape
    if "q" in params and fab.kind == "spineleaf":
        opts.setdefault("q", fab.shape[1])
    return opts


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
    need, limit = est * BYTES_PER_FLOW, float(parse_size(max_memory, "--max-memory"))
    if need > limit:
        raise PatternError(
            f"{name} on {fab.label} ({fab.num_nodes} nodes) would materialise about {est:.3g} flows, "
            f"~{need / 2 ** 30:.3g} GiB (limit --max-memory {max_memory}). The metrics route every flow; for "
            f"fabrics this large only generators with a compact form are timed, by symmetry "
            f"(reactccl.algorithms.compact): {_compact_hint(fab)}")


def _compact_hint(fab) -> str:
    """Which compact forms exist for ``fab`` (a sentence)."""
    if fab.kind != "torus":
        return f"compact forms exist only on tori, not on {fab.kind} fabrics"
    base = "bucket, swing-b, trivance-b (where their generator accepts the sides)"
    if len(set(fab.shape)) == 1:
        return f"on {fab.label}: sp-allreduce, k-sp-allreduce, {base}"
    return (f"on {fab.label}: {base}; sp-allreduce and k-sp-allreduce have compact forms on tori with "
            "equal sides only")


def _compact(name: str, fab, opts: dict):
    """The compact (symmetry) form of ``name`` on a torus beyond the exact-check size, else None."""
    from ..experiments.sp_goodput import compact_form  # start-up cost
    return compact_form(name, fab, opts) if fab.num_nodes > VERIFY_LIMIT else None


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
    size = parse_bytes(args.size, "--size")
    rate = parse_rate(args.link_rate, "--link-rate", require_unit=True)
    alpha = parse_time(args.alpha, "--alpha", allow_zero=True)
    hop = parse_time(args.hop_latency, "--hop-latency", allow_zero=True)
    opts = _fabric_options(args.algorithm, fab, _options(args.opt))
    cs = _compact(args.algorithm, fab, {k: v for k, v in opts.items() if k != "shape"})
    if cs is None:
        _size_guard(args.algorithm, fab, args.max_memory)
    if cs is not None:
        d, chunks, flows, how = compact_deficiency(cs), cs.num_chunks, cs.num_flows, " (by symmetry)"
    else:
        pat = generate(args.algorithm, fab.num_nodes, check=fab.num_nodes <= 1024, **opts)
        d = deficiency(pack(pat) if args.packed else pat, fab.geometry())
        chunks, flows, how = pat.num_chunks, pat.num_flows, ""
    beta = size * 8.0 / rate  # seconds to send the whole message over one link
    t_ab = d.time(alpha, beta)
    t_rounds = float(round_times(d, size, rate, hop, alpha).sum())  # the goodput model engine's time
    doc = dict(algorithm=args.algorithm, fabric=fab.label, chunks=chunks, flows=flows, by_symmetry=cs is not None,
               **{k: v for k, v in d.as_dict().items() if k not in ("max_load", "max_hops")},
               message_bytes=size, link_rate_bps=rate, alpha_s=alpha, hop_latency_s=hop,
               time_alpha_beta_s=t_ab, time_round_model_s=t_rounds, note=note)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        if note:
            print(f"note: {note}", file=sys.stderr)
        print(f"{args.algorithm} on {fab.label}: {chunks} chunks, {flows} flows{how}, S = {d.rounds} rounds")
        print(f"  Vol_abs = {d.vol_abs:.4g} N, Vol_phys = {d.vol_phys:.4g} N, Q = {d.q:.4g} N")
        print(f"  Psi = {d.psi:.4f}  Theta = {d.theta:.4f}  Omega = {d.omega:.4f}")
        print(f"  time for N = {fmt_size(size)} ({size} B) at {rate / 1e9:g} Gb/s: alpha*S + beta*Q = {alpha * 1e9:g} ns x "
              f"{d.rounds} + {beta * 1e6:.4g} us/N x {d.q:.4g} N = {t_ab * 1e6:.4g} us;"
              f" round model (per round: alpha + longest route x {hop * 1e9:g} ns + most loaded link's bytes / "
              f"rate; as sp goodput --engine model) {t_rounds * 1e6:.4g} us")
    return 0


def _ksp(args) -> int:
    from ..algorithms.kspt import ksp_tree  # start-up cost
    from ..topology.torus import TorusGeometry
    fab = _fabric(args.fabric)
    if fab.kind != "torus" or len(set(fab.shape)) != 1:
        raise PatternError(f"sp ksp: k-SP trees are built on tori with equal sides (--fabric torus:NxN), "
                           f"got {fab.label}")
    geom = TorusGeometry(fab.shape)
    ks = _int_list(args.ks, "--ks") if args.ks else list(range(1, geom.diameter + 1))
    bad = [k for k in ks if not 1 <= k <= geom.diameter]
    if bad:
        raise PatternError(f"--ks {bad[0]}: a k-SP depth bound is in 1..H = {geom.diameter} on {fab.label} "
                           f"(k = H is SP-allreduce itself; a larger k builds the same trees)")
    if fab.num_nodes <= VERIFY_LIMIT:
        _size_guard("k-sp-allreduce", fab, args.max_memory)  # beyond: by symmetry, nothing materialised
    else:
        check_tree_sweep(fab, ks)   # ... but the routes are: refused up front when they would not fit
    rows = []
    for k in ks:  # everything computed before the table is printed
        parent, L, W = ksp_tree(geom, k)
        cs = _compact("k-sp-allreduce", fab, {"k": k})
        if cs is None:
            pat = generate("k-sp-allreduce", geom.num_nodes, check=geom.num_nodes <= VERIFY_LIMIT, k=k,
                           shape=fab.shape)
        d = compact_deficiency(cs) if cs is not None else deficiency(pat, geom)
        rows.append(f"  {k:3d} {len(L) - 1:5d} {d.rounds:6d} {W:7d} {d.theta:7.3f} {d.omega:7.3f}  {L}")
    print(f"k-SP-allreduce on {fab.label} (p = {geom.num_nodes}, H = {geom.diameter})")
    print(f"  {'k':>3s} {'depth':>5s} {'rounds':>6s} {'W(T)':>7s} {'Theta':>7s} {'Omega':>7s}  layer distances")
    print("\n".join(rows))
    return 0


#: ``sp goodput`` flags -> the run_experiment argument they set (``--shape`` sets ``shapes``
#: for sp-rect, ``shape`` for the others).
_FLAGS = {"--sides": "sides", "--values": "values", "--families": "families", "--ks": "ks"}


def _applies(flag: str, key: str, name: str) -> None:
    """PatternError when experiment ``name`` does not take ``flag`` (run_experiment's ``key``)."""
    if key not in OPTIONS[name]:
        takes = ", ".join(e for e, o in OPTIONS.items() if key in o)
        raise PatternError(f"{flag} does not apply to {name}; it applies to {takes}")


def _goodput(args) -> int:
    from ..experiments.sp_figures import run_experiment  # start-up cost
    name = args.name
    kw = dict(engine=args.engine, quick=args.quick, log=progress)
    for flag, key in _FLAGS.items():
        if getattr(args, key) is not None:
            _applies(flag, key, name)
    if args.shape is not None:
        _applies("--shape", "shapes" if name == "sp-rect" else "shape", name)
    if args.sizes:
        kw["sizes"] = list(dict.fromkeys(parse_bytes(s, "--sizes") for s in args.sizes.split(",")))
    if args.sides:
        kw["sides"] = list(dict.fromkeys(_int_list(args.sides, "--sides", least=3)))
        for n in kw["sides"]:          # every fabric's size, before the first one runs
            _fabric(f"torus:{n}x{n}")
    if args.values:
        if name == "sp-linkrate":
            kw["values"] = [parse_rate(v, "--values (link rates)", require_unit=True) for v in args.values.split(",")]
        else:
            kw["values"] = [parse_time(v, "--values (hop latencies)", allow_zero=True) for v in args.values.split(",")]
    if args.alpha is not None:
        kw["alpha"] = parse_time(args.alpha, "--alpha", allow_zero=True)
    if args.families:
        kw["families"] = [f.strip() for f in args.families.split(",")]
    if args.ks:
        kw["ks"] = _int_list(args.ks, "--ks")
    if args.shape:
        try:
            shapes = [tuple(int(x) for x in s.lower().split("x")) for s in args.shape.split(",")]
        except ValueError:
            raise PatternError(f"--shape: expected AxB[,CxD], got {args.shape!r}") from None
        kind = {"sp-hyperx": "hyperx", "sp-spineleaf": "spineleaf"}.get(name, "torus")
        for shape in shapes:
            _fabric(f"{kind}:{'x'.join(map(str, shape))}")
        if name == "sp-rect":
            kw["shapes"] = shapes
        elif len(shapes) > 1:
            raise PatternError(f"--shape: {name} takes one shape, got {args.shape!r}")
        else:
            kw["shape"] = shapes[0]
    print(run_experiment(name, args.out, **kw))
    return 0


def _run(args) -> int:
    try:
        return args.sp_func(args)
    except (PatternError, UnitError, ValueError) as e:
        return report(e, "error")


def add_parser(subparsers) -> None:
    """Add ``reactccl sp`` with its ``metrics`` and ``goodput`` subcommands."""
    p = subparsers.add_parser("sp", help=HELP["sp"],
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                              epilog=f"example: {EXAMPLE}")
    sub = p.add_subparsers(dest="sp_command", metavar="SUBCOMMAND")
    sub.required = True
    m = sub.add_parser("metrics", help="rounds, Ψ, Θ, Ω of a schedule on a fabric")
    m.add_argument("algorithm", help="generator name, e.g. sp-allreduce, k-sp-allreduce, bucket, swing-b")
    m.add_argument("--fabric", default="torus:8x8", help=f"torus:AxB[xC], hyperx:NxN or spineleaf:LEAVESxQ "
                                                         f"[at most {MAX_FABRIC_NODES} nodes]")
    m.add_argument("--option", "-O", dest="opt", action="append", metavar="KEY=VALUE",
                   help="generator option (repeatable), e.g. k=3")
    m.add_argument("--pack", dest="packed", action="store_true",
                   help="pack flows per (round, src, dst) first (same metrics)")
    deprecated_alias(m, "--opt", "--option")  # names before issue 9; one name per option across commands
    deprecated_alias(m, "--packed", "--pack")
    m.add_argument("--json", action="store_true", help="print one JSON document")
    m.add_argument("--size", default="1MiB", help="message size N, whole bytes (default 1MiB)")
    m.add_argument("--link-rate", default="400Gbps", help="link rate with a unit, 1/beta (default 400Gbps, §7.1)")
    m.add_argument("--alpha", default="400ns", help="alpha per round in alpha*S + beta*Q (default 400ns, one hop of §7.1)")
    m.add_argument("--hop-latency", default="400ns", help="per-hop latency of the round model (default 400ns, §7.1)")
    m.add_argument("--force", action="store_true", help="measure an SP generator on a fabric it is not built for")
    m.add_argument("--max-memory", default="4GiB", help="refuse schedules estimated above this (default 4GiB)")
    m.set_defaults(func=_run, sp_func=_metrics)
    k = sub.add_parser("ksp", help="W(T), Θ, Ω and rounds of k-SP-allreduce for each k")
    k.add_argument("--fabric", default="torus:8x8", help=f"torus:NxN [at most {MAX_FABRIC_NODES} nodes]")
    k.add_argument("--ks", help="comma-separated k (default 1..H)")
    k.add_argument("--max-memory", default="4GiB", help="refuse fabrics estimated above this (default 4GiB)")
    k.set_defaults(func=_run, sp_func=_ksp)
    g = sub.add_parser("goodput", help="a goodput experiment of the paper (§7)")
    g.add_argument("name", choices=["sp-square", "sp-linkrate", "sp-latency", "sp-rect", "sp-hyperx", "sp-spineleaf"])
    g.add_argument("--engine", default="netsim", choices=["netsim", "model", "auto"],
                   help="flow-level simulator, round-synchronous alpha-beta model, or auto (netsim up to "
                        "256 nodes, the model beyond; e.g. --sides 8,16,32,64 for all of Fig. 3)")
    g.add_argument("--sizes", help="comma-separated message sizes (default 64KiB..256MiB)")
    g.add_argument("--sides", help=f"sp-square: comma-separated n of n x n tori (default 8,16) "
                                   f"[at most {MAX_FABRIC_NODES} nodes each]")
    g.add_argument("--values", help="sp-linkrate: rates (e.g. 100Gbps,400Gbps); sp-latency: latencies (200ns,...)")
    g.add_argument("--shape", help="sp-rect: shapes like 64x16,128x8; sp-hyperx/sp-spineleaf: one shape")
    g.add_argument("--alpha", help="per-round overhead for the model engine, e.g. 1us (default 0; 0 allowed)")
    g.add_argument("--families", help="families to run, e.g. SP,Bucket,Swing (default: the experiment's)")
    g.add_argument("--ks", help="k-SP depth bounds to try, e.g. 1,2,3,5,8 (default 1..H; H always added; "
                                "netsim beyond 256 nodes: 1,2,H/4,H/2,H)")
    g.add_argument("--quick", action="store_true", help="small configuration (tiny fabric, 3 sizes; seconds)")
    g.add_argument("--out", default=DEFAULT_OUT,
                   help=f"output folder for NAME.json and NAME.png (default {DEFAULT_OUT})")
    g.set_defaults(func=_run, sp_func=_goodput)

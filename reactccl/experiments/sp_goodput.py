"""Goodput of SP-allreduce and its competitors against message size (SP-allreduce §7).

Goodput ``G = N (p - 1) / (p T)`` (bit/s, N the message in bits, T the completion time),
bounded by ``B_v / 2`` with B_v a node's total injection bandwidth (§7.1). Every schedule
is generated, packed (one message per link and round, :func:`~reactccl.algorithms.torus_common.pack`;
SP and k-SP pack all their trees together as §3.1 prescribes, the baselines only within each
of their independent instances) and timed by one of two engines:

* ``netsim`` — the flow-level simulator :class:`reactccl.netsim.SimulatedCluster` (max-min
  fair sharing, per-link latency = the hop latency, data-driven flow starts, each flow on
  the geometry's route, as in the model). The paper uses SST, a packet-level simulator: see
  :data:`PAPER` and the experiment notes for what that changes.
* ``model`` — the round-synchronous α-β model of :mod:`reactccl.cost.deficiency`: each
  round costs alpha + its longest route x hop latency + its most loaded link's bytes / link
  rate (:func:`~reactccl.cost.deficiency.round_times`, the same as ``reactccl sp metrics``).
  Beyond :data:`VERIFY_LIMIT` ranks, schedules with a compact form
  (:mod:`reactccl.algorithms.compact`: SP, k-SP, Bucket, Swing-B, Trivance-B on tori) are
  timed from one transversal of their flows (:mod:`reactccl.cost.symmetric`, exact), which
  is what makes 64x64 (134 M flows per schedule) take seconds.

A *family* (SP, k-SP, Bucket, Swing, Trivance, Ring, RD) may have several variants (Swing
B and L, k-SP for each k); like the paper, a family's curve is its best variant at each size.

Source: SP-allreduce (arXiv 2610.16387) §7.1-7.6.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..algorithms import generate
from ..algorithms.registry import checked_options
from ..algorithms.compact import COMPACT_GENERATORS, compact_schedule, tree_route_links
from ..algorithms.sp_check import check_tree_family
from ..algorithms.torus_common import pack
from ..cost.deficiency import deficiency, round_times
from ..cost.symmetric import compact_deficiency, links_bytes
from ..netsim import SimulatedCluster
from ..pattern import CollectivePattern, PatternError, verify
from ..pattern.verify import DEFAULT_MAX_BYTES
from ..topology.torus import (DEFAULT_HOP_LATENCY, DEFAULT_LINK_RATE, HyperXGeometry, SpineLeafGeometry,
                              TorusGeometry, fabric_topology)

__all__ = ["Fabric", "SIZES", "Variant", "family_variants", "torus_ks", "NETSIM_KS", "check_sizes", "check_tree_sweep", "GoodputRun", "goodput_sweep", "compact_form", "VERIFY_LIMIT",
           "NETSIM_LIMIT"]

KIB, MIB = 1024, 1024 * 1024
SIZES = [64 * KIB * 2 ** i for i in range(13)]  # 64 KiB .. 256 MiB, §7
VERIFY_LIMIT = 256  # exact count check up to this many ranks; structural (generator) checks beyond
NETSIM_LIMIT = 1024  # nodes; the simulator holds every flow (SP on 64x64: 134 M)
NETSIM_KS = 4  # k-SP depth bounds tried by default with netsim beyond VERIFY_LIMIT nodes (30-80 s each on 32x32)
MAX_FABRIC_NODES = 1 << 20  # nodes of any fabric (Fabric refuses more before sizing anything by it)
EXACT_CELLS = 2 ** 28  # ... or while ranks x ranks x chunks stays this small (Swing-L, Trivance-L)


@dataclass(frozen=True)
class Fabric:
    """A network of the paper's evaluation.

    Attributes:
        kind: "torus", "hyperx" or "spineleaf".
        shape: torus/HyperX sides; for spine-leaf ``(leaves, q)`` (hosts laid out as a
            leaves x q grid for the torus baselines).
    """

    kind: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        """Raises ValueError: unknown kind, or a shape of the wrong length (spine-leaf needs
        ``(leaves, q)``, HyperX two sides), with a side below 1, or of more than
        :data:`MAX_FABRIC_NODES` nodes (checked before anything is sized by it)."""
        dims = {"torus": None, "hyperx": 2, "spineleaf": 2}
        if self.kind not in dims:
            raise ValueError(f"fabric kind must be torus, hyperx or spineleaf, got {self.kind!r}")
        want = dims[self.kind]
        if not self.shape or (want is not None and len(self.shape) != want):
            what = {"torus": "AxB[xC...]", "hyperx": "NxN", "spineleaf": "LEAVESxQ (e.g. 32x16)"}[self.kind]
            raise ValueError(f"{self.kind} fabric needs a shape {what}, got {'x'.join(map(str, self.shape)) or 'none'}")
        if min(self.shape) < 1:
            raise ValueError(f"{self.kind} fabric: every side must be >= 1, got {self.shape}")
        nodes = math.prod(self.shape)
        if nodes > MAX_FABRIC_NODES:
            raise ValueError(f"{self.kind} fabric {'x'.join(map(str, self.shape))}: {nodes:,} nodes, above the "
                             f"limit of {MAX_FABRIC_NODES:,} (e.g. torus:1024x1024, which 'sp metrics' measures "
                             "in ~25 s and ~1.2 GB)")

    @property
    def label(self) -> str:
        """e.g. ``torus 8x8``."""
        return f"{self.kind} {'x'.join(map(str, self.shape))}"

    @property
    def num_nodes(self) -> int:
        """Compute nodes p."""
        return int(np.prod(self.shape))

    def geometry(self):
        """The routing geometry (:mod:`reactccl.topology.torus`)."""
        if self.kind == "torus":
            return TorusGeometry(self.shape)
        if self.kind == "hyperx":
            return HyperXGeometry(self.shape)
        if self.kind == "spineleaf":
            return SpineLeafGeometry(q=self.shape[1], leaves=self.shape[0])
        raise ValueError(f"fabric kind must be torus, hyperx or spineleaf, got {self.kind!r}")

    def topology(self, link_rate: float, hop_latency: float):
        """The :class:`reactccl.topology.Topology` the simulator runs on, routing every flow
        on the geometry's route (dimension order on tori and HyperX, the sender's spine on
        spine-leaf), as the model does."""
        return fabric_topology(self.geometry(), link_rate, hop_latency)

    def bound(self, link_rate: float) -> float:
        """Goodput bound B_v / 2 in bit/s (B_v = links per node x link rate)."""
        return self.geometry().degree * link_rate / 2


@dataclass
class Variant:
    """One schedule of a family: its label, generator name and options."""

    family: str
    label: str
    name: str
    options: dict = field(default_factory=dict)
    pack_by: str = "all"  # "all": one message per link and round; "instance": chunk // p; "chunk"

    def packed(self, pat: CollectivePattern) -> CollectivePattern:
        """``pat`` packed per link and round, within independent instances only."""
        if self.pack_by == "all":
            return pack(pat)
        ids = np.arange(pat.num_chunks)
        return pack(pat, ids // pat.num_ranks if self.pack_by == "instance" else ids)

    def pattern(self, p: int) -> CollectivePattern:
        """The checked pattern: exactly (:func:`~reactccl.pattern.verify`) up to
        :data:`VERIFY_LIMIT` ranks or while the count table stays small, structurally
        (:func:`~reactccl.algorithms.sp_check.check_tree_family`) beyond.

        Raises:
            PatternError: the generator refuses the fabric or the check fails.
        """
        pat = generate(self.name, p, check=False, **self.options)
        if p <= VERIFY_LIMIT or p * p * pat.num_chunks <= EXACT_CELLS:
            verify(pat)
        else:
            check_tree_family(pat)
        return pat

    def compact(self, fabric: Fabric):
        """This variant's compact form on ``fabric`` (see :func:`compact_form`)."""
        return compact_form(self.name, fabric, self.options)


def compact_form(name: str, fabric: Fabric, options: dict | None = None):
    """The checked :class:`~reactccl.algorithms.compact.CompactSchedule` of generator
    ``name`` on ``fabric`` (options as for the generator; ``shape`` comes from the fabric),
    or None where there is none: not a torus, no compact generator, or sides it does not
    cover (rectangular SP).

    Raises:
        PatternError: an unknown option or a value of the wrong type, named.
    """
    if fabric.kind != "torus" or name not in COMPACT_GENERATORS:
        return None
    opts = checked_options(name, {k: v for k, v in (options or {}).items() if k != "shape"})
    try:
        return compact_schedule(name, fabric.num_nodes, shape=fabric.shape, **opts)
    except PatternError:
        return None


#: Most route links a by-symmetry tree sweep may evaluate in all (time bound), and the rate it was
#: measured at on a 2-core machine (128x128, all k: 50 M links in about 23 s).
MAX_SWEEP_LINKS = 300_000_000
SWEEP_LINKS_PER_S = 2.0e6


def check_tree_sweep(fabric: Fabric, ks: list[int], sp: bool = False, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Refuse, before any work, a by-symmetry sweep of k-SP over ``ks`` (and SP with ``sp``)
    on ``fabric`` whose largest routes (the smallest k) would need more than ``max_bytes``, or
    whose routes over all of ``ks`` exceed :data:`MAX_SWEEP_LINKS` (a time bound: about
    ``MAX_SWEEP_LINKS / SWEEP_LINKS_PER_S`` seconds).

    Raises:
        PatternError: naming the variant, its route hops and the estimate.
    """
    if fabric.kind != "torus" or len(set(fabric.shape)) != 1 or fabric.num_nodes <= VERIFY_LIMIT:
        return
    geom = fabric.geometry()
    worst = [("k-SP k=%d" % min(ks), min(ks))] if ks else []
    if sp:
        worst.append(("SP", None))
    for label, k in worst:
        links = tree_route_links(geom, k)
        need = links_bytes(links)
        if need > max_bytes:
            raise PatternError(f"{label} on {fabric.label}: its transversal routes cover {links:,} links, about "
                               f"{need / 2**30:.1f} GiB to evaluate by symmetry (limit {max_bytes / 2**30:.1f} GiB); "
                               f"refused before starting (fewer ranks, or larger k with --ks)")
    total = sum(tree_route_links(geom, k) for k in ks) + (tree_route_links(geom, None) if sp else 0)
    if total > MAX_SWEEP_LINKS:
        raise PatternError(f"k-SP sweep over k = {', '.join(map(str, ks))} on {fabric.label}: its routes cover "
                           f"{total:,} links in all, about {total / SWEEP_LINKS_PER_S / 60:.0f} min to evaluate "
                           f"(limit {MAX_SWEEP_LINKS:,} links); refused before starting (fewer k with --ks, or "
                           f"fewer ranks)")


def torus_ks(shape: tuple[int, ...], ks: list[int] | None = None) -> list[int]:
    """The k-SP depth bounds to try on a torus of ``shape``: ``ks`` (default 1..H) with values
    above H = sum of floor(n/2) cut to H (the same tree, :func:`~reactccl.algorithms.kspt.ksp_tree`),
    and H itself always included, so that the envelope over k contains the BFS tree
    (SP-allreduce §5). Sorted, without duplicates.

    Raises:
        ValueError: a k below 1 or not an integer.
    """
    H = sum(n // 2 for n in shape)
    if ks is None:
        return list(range(1, H + 1))
    bad = [k for k in ks if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1]
    if bad:
        raise ValueError(f"k-SP depth bounds must be integers >= 1, got {bad[0]!r}")
    return sorted({min(int(k), H) for k in ks} | {H})


def family_variants(fabric: Fabric, families: list[str], ks: list[int] | None = None) -> list[Variant]:
    """The variants of each family on ``fabric``, for k-SP one per k of :func:`torus_ks`
    (variants whose generator then refuses this shape, e.g. Trivance-L off powers of three,
    are left out by :func:`goodput_sweep`).

    Raises:
        ValueError: an unknown family or a bad k.
    """
    shape = tuple(fabric.shape)
    tor = {"shape": shape}
    out: list[Variant] = []
    for fam in families:
        if fam == "SP":
            if fabric.kind == "torus":
                out.append(Variant(fam, "sp-allreduce", "sp-allreduce", tor))
            elif fabric.kind == "hyperx":
                out.append(Variant(fam, "sp-hyperx", "sp-hyperx", tor))
            else:
                out.append(Variant(fam, "sp-spineleaf", "sp-spineleaf", {"q": shape[1]}))
        elif fam == "k-SP":
            for k in torus_ks(shape, ks):
                out.append(Variant(fam, f"k={k}", "k-sp-allreduce", {"k": k, "shape": shape}))
        elif fam == "Bucket":
            out.append(Variant(fam, "bucket", "bucket", tor, "instance"))
        elif fam == "Swing":
            out += [Variant(fam, "swing-b", "swing-b", tor, "instance"),
                    Variant(fam, "swing-l", "swing-l", tor, "chunk")]
        elif fam == "Trivance":
            out += [Variant(fam, "trivance-b", "trivance-b", tor, "instance"),
                    Variant(fam, "trivance-l", "trivance-l", tor, "chunk")]
        elif fam == "Ring":
            out.append(Variant(fam, "torus-ring", "torus-ring", tor, "chunk") if fabric.kind == "torus"
                       else Variant(fam, "ring", "ring", {}, "chunk"))
        elif fam == "RD":
            out.append(Variant(fam, "rd-allreduce", "rd-allreduce", {}, "chunk"))
        else:
            raise ValueError(f"unknown family {fam!r}; known: SP, k-SP, Bucket, Swing, Trivance, Ring, RD")
    return out


@dataclass
class GoodputRun:
    """Result of :func:`goodput_sweep`.

    Attributes:
        rows: one dict per (variant, size): family, variant, size (bytes), time (s),
            goodput (bit/s), fraction of the bound.
        best: one dict per (family, size): the best variant and its goodput.
        skipped: ``{variant: reason}`` for variants whose generator refused the fabric.
        meta: fabric, engine, link rate, hop latency, bound, wall time, messages timed (for
            variants in ``by_symmetry``: the flows of their transversal), messages/s.
    """

    rows: list[dict]
    best: list[dict]
    skipped: dict
    meta: dict


def check_sizes(sizes) -> list[int]:
    """``sizes`` as whole bytes >= 1, duplicates removed, order kept.

    Raises:
        ValueError: a size that is not a whole number >= 1.
    """
    out = []
    for s in sizes:
        if isinstance(s, bool) or not float(s) == int(s) or int(s) < 1:
            raise ValueError(f"message sizes must be whole numbers of bytes >= 1, got {s!r}")
        out.append(int(s))
    return list(dict.fromkeys(out))


def default_netsim_ks(shape: tuple[int, ...]) -> list[int]:
    """A small set of k for netsim on large tori: 1, 2, H/4, H/2 and H (:data:`NETSIM_KS`
    values below H, plus H)."""
    H = sum(n // 2 for n in shape)
    return sorted({k for k in (1, 2, H // 4, H // 2) if 1 <= k < H} | {H})


def _time_one(engine, packed, fabric, size, link_rate, hop_latency, topo, d, alpha=0.0):
    if engine == "netsim":
        cl = SimulatedCluster(topo, np.arange(packed.num_ranks), size, ecmp_ports=1)
        return cl.run_epoch(packed).duration
    return float(round_times(d, size, link_rate, hop_latency, alpha).sum())


def goodput_sweep(fabric: Fabric, families: list[str], sizes: list[int] | None = None,
                  link_rate: float = DEFAULT_LINK_RATE, hop_latency: float = DEFAULT_HOP_LATENCY,
                  engine: str = "netsim", ks: list[int] | None = None, alpha: float = 0.0,
                  log=print) -> GoodputRun:
    """Time every variant of ``families`` on ``fabric`` for every message size.

    Args:
        sizes: message sizes in bytes (default :data:`SIZES`).
        link_rate: bit/s per link; hop_latency: s per hop.
        engine: "netsim", "model" (see the module docstring) or "auto" (netsim up to
            :data:`VERIFY_LIMIT` nodes, the model beyond; the two differ for k-SP, whose
            rounds netsim overlaps, and for Bucket on rectangular tori; ``meta["engine"]``
            says which one timed the run).
        ks: depth bounds tried for k-SP (default 1..H; with netsim beyond :data:`VERIFY_LIMIT`
            nodes :func:`default_netsim_ks`, logged, since each k then takes 30-80 s); H is
            always added (:func:`torus_ks`).
        alpha: extra seconds per round (model engine only; the paper's simulator charges
            none for the reduction, but a per-message overhead is what rewards fewer rounds).
        log: progress printer (``None`` for silence).

    Raises:
        ValueError: unknown engine or family; netsim on more than :data:`NETSIM_LIMIT` nodes;
            a bad size or k.

    Variants whose generator refuses the fabric (PatternError or ValueError, e.g. a torus
    layout with a side below 3 for the baselines on a 4x1 spine-leaf) go to ``skipped``
    with the reason; the run goes on.
    """
    if engine not in ("netsim", "model", "auto"):
        raise ValueError(f"engine must be 'netsim', 'model' or 'auto', got {engine!r}")
    if engine == "auto":
        engine = "netsim" if fabric.num_nodes <= VERIFY_LIMIT else "model"
    if engine == "netsim" and fabric.num_nodes > NETSIM_LIMIT:
        raise ValueError(f"{fabric.label}: {fabric.num_nodes} nodes is beyond the flow-level simulator "
                         f"(SP alone has 2d p^2 = {2 * len(fabric.shape) * fabric.num_nodes ** 2} flows); "
                         f"use engine 'model' (exact by symmetry on tori) or 'auto'")
    if alpha and engine != "model":
        raise ValueError("alpha (per-round overhead) is only modelled by the 'model' engine")
    sizes = check_sizes(SIZES if sizes is None else sizes)
    log = log or (lambda *a, **k: None)
    if engine == "netsim" and fabric.num_nodes > VERIFY_LIMIT and ks is None and "k-SP" in families:
        ks = default_netsim_ks(fabric.shape)
        log(f"  note: netsim on {fabric.label} ({fabric.num_nodes} nodes) takes 30-80 s per k-SP depth bound: "
            f"trying k = {','.join(map(str, ks))} only (--ks for others); --engine auto or model times all k in "
            "seconds (exact by symmetry, round-synchronous)")
    t0 = time.perf_counter()
    p = fabric.num_nodes
    topo = fabric.topology(link_rate, hop_latency) if engine == "netsim" else None
    geom = fabric.geometry()
    bound = fabric.bound(link_rate)
    rows, skipped, flows, by_symmetry = [], {}, 0, []
    if engine == "model" and p > VERIFY_LIMIT and fabric.kind == "torus":
        check_tree_sweep(fabric, torus_ks(fabric.shape, ks) if "k-SP" in families else [], sp="SP" in families)
    variants = family_variants(fabric, families, ks)
    for var in variants:
        tv = time.perf_counter()
        try:
            cs = var.compact(fabric) if engine == "model" and p > VERIFY_LIMIT else None
            packed = None if cs is not None else var.packed(var.pattern(p))
        except (PatternError, ValueError) as e:
            skipped[var.label] = str(e)
            continue
        if cs is not None:
            by_symmetry.append(var.label)
            d, how = compact_deficiency(cs), f"{len(cs.step):9d} flows of {cs.num_flows} (symmetry)"
        else:
            d = deficiency(packed, geom) if engine == "model" else None
            how = f"{packed.num_flows:9d} messages"
        steps = d.rounds if d is not None else packed.num_steps
        for size in sizes:
            T = _time_one(engine, packed, fabric, size, link_rate, hop_latency, topo, d, alpha)
            flows += len(cs.step) if cs is not None else packed.num_flows
            G = size * 8 * (p - 1) / (p * T)
            rows.append(dict(family=var.family, variant=var.label, size=int(size), time=T, goodput=G,
                             fraction=G / bound, steps=steps))
        log(f"  {var.family:9s} {var.label:14s} {steps:4d} steps {how} {time.perf_counter() - tv:6.2f} s")
    best = []
    for fam in dict.fromkeys(r["family"] for r in rows):
        for size in sizes:
            cand = [r for r in rows if r["family"] == fam and r["size"] == size]
            b = max(cand, key=lambda r: r["goodput"])
            best.append(dict(family=fam, size=int(size), goodput=b["goodput"], fraction=b["fraction"],
                             variant=b["variant"], time=b["time"]))
    wall = time.perf_counter() - t0
    meta = dict(fabric=fabric.label, engine=engine,
                ks=[v.options["k"] for v in variants if v.family == "k-SP"], link_rate=link_rate, hop_latency=hop_latency, alpha=alpha,
                bound=bound, wall_s=wall, messages_simulated=flows, by_symmetry=by_symmetry,
                messages_per_s=flows / wall if wall > 0 else float("nan"))
    return GoodputRun(rows, best, skipped, meta)

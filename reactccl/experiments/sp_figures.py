"""The SP-allreduce paper's goodput experiments: definitions, reports, JSON and PNG.

Experiments (``reactccl sp goodput NAME``):

* ``sp-square`` — square tori (default 8x8, 16x16): SP, k-SP (envelope over k, best-k
  table like Table 1), Bucket, Swing, Trivance (Fig. 3, Fig. 2a, Table 1). All four of the
  paper's tori: ``sides=[8, 16, 32, 64], engine="auto"`` (the simulator up to 16x16, the
  α-β model beyond, exact by symmetry: :mod:`reactccl.algorithms.compact`).
* ``sp-linkrate`` / ``sp-latency`` — 8x8, link rates 100 Gb/s..3.2 Tb/s / hop latencies
  200..1600 ns: k-SP's gain over the best baseline (Fig. 2b, 2c).
* ``sp-rect`` — 64x16, 128x8, 256x4 with Ring added (Fig. 4).
* ``sp-hyperx`` — HyperX 32x32 (Fig. 5 left); ``sp-spineleaf`` — 32 leaves x 16 hosts,
  16 spines, with Ring and recursive doubling, from 32 KiB (Fig. 5 right).

Each writes ``<out>/<name>.json`` (rows, per-family best, metadata, the paper's figures)
and ``<out>/<name>.png`` and returns the printed report. ``quick=True`` runs the small
configuration of :data:`QUICK` instead of the paper's (a few seconds each; for smoke tests
and ``reactccl experiment sp-* --quick``, not for comparison with the paper).
:data:`PAPER` holds the numbers the paper states in its text (its figures themselves are
lost), so the report sets ours beside them.

Why our numbers differ from the paper's (SST, packet level) — measured 2026-11-29:

* Large messages: flow-level max-min sharing has no packetisation, header, credit or queueing
  losses, so bandwidth-optimal schedules sit closer to B_v/2 than in SST (SP 32x32 HyperX
  99.1% vs 94.9%; 256x4 torus 96.2% vs 91.4%). Ratios between schedules survive better than
  absolute values (HyperX SP/Swing 15.4x vs 14.8x).
* Small messages: both engines charge only hop latency (400 ns/hop) and no per-message
  overhead, so a tree of depth k costs about as much latency as the BFS tree (the edge routes
  add up to H hops either way). In the round model with alpha = 0, k-SP never beats SP: the
  best k is H at every size (8x8, 64 KiB: k=7 73.15, k=8 = SP 73.26 Gb/s). In netsim a
  shallower tree wins by about 1% at small sizes because messages start as soon as their
  inputs arrive (8x8, 64 KiB: k=6 74.0 vs SP 73.3 Gb/s). SST's per-message costs reward fewer
  rounds; with ``alpha = 1 us`` per round (model engine) the best k grows with the message
  size as in Table 1.
* Data-driven flows vs rounds: netsim starts a message when its inputs have arrived; the
  model is round-synchronous (eq. 6). For schedules balanced in every round (SP, Swing and
  Bucket on square tori) both give the same times. k-SP trees are not: 16x16, k=2, 256 KiB
  takes 1.90e-5 s in netsim and 2.33e-5 s in the model, so ``engine="auto"`` reports say
  which engine timed each fabric and carry :data:`AUTO_NOTE`. Bucket on rectangular tori
  is much better in netsim (instances overlap) than in the round model (256 MiB: 32x4 651
  vs 423 Gb/s, 64x16 748 vs 451, paper 706); ``engine="auto"`` keeps the model for the
  paper's 1024-node rectangles (netsim: ~30 s per schedule and size on 64x16, hours for
  the whole figure), so reports print a caveat wherever the model timed Bucket there.
* Routing: the simulator routes like the model and the paper: dimension order on tori and
  HyperX, the sender's spine on spine-leaf (§6.3). Hashed ECMP instead collides on leaf-spine
  links: SP on an 8x8 spine-leaf then reaches 89.0% against 99.97% (bench/bench_spineleaf.py --ecmp).
* Spine-leaf at 32 KiB: SP is 3.5x the best baseline here (paper 1.72x); with no per-message
  cost, the 2-round star schedule gains most where the others' 10-1022 rounds of hop latency
  dominate.

Source: SP-allreduce (arXiv 2610.16387) §7.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..suggest import did_you_mean
from .outputs import existing, result_stem
from .sp_goodput import KIB, MIB, SIZES, Fabric, GoodputRun, goodput_sweep

__all__ = ["EXPERIMENTS", "QUICK", "OPTIONS", "PAPER", "run_experiment", "gain_table", "fmt_size", "prepare_out",
           "panel_title", "DEFAULT_OUT", "STYLES", "goodput_figure"]

#: Where ``reactccl sp goodput`` and ``reactccl experiment sp-*`` write without ``--out``.
DEFAULT_OUT = "results/sp"

BASELINES = ("Bucket", "Swing", "Trivance")

PAPER = {
    "sp-square": {"max k-SP gain over best baseline (%)": {"8x8": 8.0, "16x16": 19.0, "32x32": 17.7, "64x64": 18.3},
                  "at size": {"8x8": "1 MiB", "16x16": "1 MiB", "32x32": "4 MiB", "64x64": "64 MiB"},
                  "SP / Bucket at 64 KiB": {"8x8": 1.74, "64x64": 2.00},
                  "best k, 8x8 (Table 1)": [1, 5, 3, 5, 5, 5, 5, 8, 8, 8, 8, 8, 8],
                  "best k, 16x16 (Table 1)": [3, 3, 3, 3, 3, 4, 7, 7, 7, 15, 16, 16, 16]},
    "sp-linkrate": {"largest gain": "20.6% at 3.2 Tb/s, 1 MiB"},
    "sp-latency": {"gain at 1600 ns": "20.2% at 512 KiB"},
    "sp-rect": {"SP at 256 MiB (% of 800 Gb/s)": {"64x16": 97.2, "128x8": 95.5, "256x4": 91.4},
                "max SP gain over best baseline": {"64x16": "1.22x at 64 MiB", "128x8": "1.34x at 128 MiB",
                                                   "256x4": "1.65x at 64 MiB"},
                "Bucket at 256 MiB (Gb/s)": {"64x16": 706, "128x8": 620, "256x4": 502},
                "Swing at 256 MiB (Gb/s)": {"64x16": 598, "128x8": 509, "256x4": 361},
                "SP rounds": {"64x16": 80, "128x8": 136, "256x4": 260}},
    "sp-hyperx": {"SP at 256 MiB": "11.76 Tb/s = 94.9% of 12.4 Tb/s", "Swing at 256 MiB": "0.794 Tb/s",
                  "SP / Swing": 14.82},
    "sp-spineleaf": {"SP at 256 MiB": "199.7 Gb/s = 99.8% of 200 Gb/s",
                     "max SP gain": "1.72x at 32 KiB (28.4 vs 16.5 Gb/s for Trivance)"},
}


def fmt_size(b: int) -> str:
    """Exact label of a size in bytes: ``65536 -> '64 KiB'``, ``100000 -> '100 KB'``,
    ``1536 -> '1.5 KiB'``, ``3 -> '3 B'`` (binary units first, then decimal, then binary
    with up to three decimals, else bytes)."""
    b = int(b)
    units = [(2 ** 30, "GiB"), (MIB, "MiB"), (KIB, "KiB")]
    for u, name in units:
        if b >= u and b % u == 0:
            return f"{b // u} {name}"
    for u, name in [(10 ** 9, "GB"), (10 ** 6, "MB"), (10 ** 3, "KB")]:
        if b >= u and b % u == 0:
            return f"{b // u} {name}"
    for u, name in units:
        if b >= u and (b * 1000) % u == 0:
            return f"{b / u:g} {name}"
    return f"{b} B"


def _best(run: GoodputRun, fam: str, size: int) -> dict | None:
    for r in run.best:
        if r["family"] == fam and r["size"] == size:
            return r
    return None


def gain_table(run: GoodputRun, ours: str, against=BASELINES) -> list[dict]:
    """Per size: ``ours`` family's goodput over the best of ``against`` (the paper's gain(M));
    empty where ``ours`` or every baseline is missing."""
    out = []
    for size in sorted({r["size"] for r in run.best}):
        mine = _best(run, ours, size)
        others = [b for b in (_best(run, f, size) for f in against) if b is not None]
        if mine is None or not others:
            continue
        top = max(others, key=lambda r: r["goodput"])
        out.append(dict(size=size, ours=mine["goodput"], best_other=top["goodput"], other=top["family"],
                        ratio=mine["goodput"] / top["goodput"], variant=mine["variant"]))
    return out


def _gain_summary(g: list[dict], ours: str) -> tuple[dict, str]:
    """Max and min of a :func:`gain_table` (where ``ours`` wins most and where it loses)."""
    if not g:
        return {}, f"no {ours} and baseline at the same size here: no gain to report"
    top, low = max(g, key=lambda r: r["ratio"]), min(g, key=lambda r: r["ratio"])
    summ = dict(max_gain=top["ratio"], at=fmt_size(top["size"]), over=top["other"],
                min_ratio=low["ratio"], min_at=fmt_size(low["size"]), min_vs=low["other"])
    text = (f"{ours} over best baseline: max {top['ratio']:.3f}x at {fmt_size(top['size'])} (over {top['other']}), "
            f"min {low['ratio']:.3f}x at {fmt_size(low['size'])} (vs {low['other']})")
    if low["ratio"] < 0.995:
        text += f" -- {ours} loses there by {100 * (1 - low['ratio']):.1f}%"
    return summ, text


def _table(run: GoodputRun) -> str:
    fams = list(dict.fromkeys(r["family"] for r in run.best))
    lines = [f"{run.meta['fabric']}  (goodput Gb/s; bound {run.meta['bound'] / 1e9:.0f} Gb/s; "
             f"engine {run.meta['engine']})",
             "  size      " + "".join(f"{f:>11s}" for f in fams)]
    for size in sorted({r["size"] for r in run.best}):
        vals = [_best(run, f, size) for f in fams]
        lines.append(f"  {fmt_size(size):9s} " + "".join(f"{v['goodput'] / 1e9:11.1f}" if v else f"{'-':>11s}"
                                                          for v in vals))
    if run.skipped:
        lines.append("  not available here: " + "; ".join(f"{k} ({v.splitlines()[0]})" for k, v in run.skipped.items()))
    sym = run.meta.get("by_symmetry") or []
    lines.append(f"  wall {run.meta['wall_s']:.1f} s, {run.meta['messages_simulated']} messages timed, "
                 f"{run.meta['messages_per_s']:.0f} messages/s"
                 + (f" ({len(sym)} schedules from one transversal by symmetry)" if sym else ""))
    return "\n".join(lines)


#: Line style per family: SP wide, solid, hollow circles, below; k-SP (its envelope equals SP
#: wherever the best k is H) dashed with crosses on top, so both show where they coincide; the
#: baselines each their own marker and dash.
STYLES = {
    "SP": dict(color="tab:blue", ls="-", lw=3.0, marker="o", ms=8, mfc="none", mew=1.5, zorder=2),
    "k-SP": dict(color="tab:orange", ls="--", lw=1.5, marker="x", ms=7, mew=1.5, zorder=4),
    "Bucket": dict(color="tab:green", ls="-.", lw=1.2, marker="s", ms=4, zorder=3),
    "Swing": dict(color="tab:red", ls=":", lw=1.5, marker="^", ms=5, zorder=3),
    "Trivance": dict(color="tab:purple", ls=(0, (5, 2, 1, 2)), lw=1.2, marker="v", ms=5, zorder=3),
    "Ring": dict(color="tab:brown", ls=(0, (1, 1)), lw=1.2, marker="D", ms=4, zorder=3),
    "RD": dict(color="tab:gray", ls=(0, (3, 1, 1, 1, 1, 1)), lw=1.2, marker="P", ms=5, zorder=3),
}


def goodput_figure(runs: list[GoodputRun], title: str):
    """The figure :func:`run_experiment` writes: a panel per run, goodput (Gb/s) against message
    size per family in :data:`STYLES`, and the bound ``B_v / 2``."""
    import matplotlib  # start-up cost: matplotlib only when drawing
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(5.2 * len(runs), 4), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        for fam in dict.fromkeys(r["family"] for r in run.best):
            pts = sorted((r["size"], r["goodput"]) for r in run.best if r["family"] == fam)
            style = STYLES.get(fam, dict(marker="o", ms=3))
            ax.plot([s for s, _ in pts], [g / 1e9 for _, g in pts], label=fam, **style)
        ax.axhline(run.meta["bound"] / 1e9, color="k", ls="--", lw=0.8, label="bound $B_v/2$")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("goodput (Gb/s)")
        ax.set_title(panel_title(run), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def _plot(runs: list[GoodputRun], path: Path, title: str) -> None:
    import matplotlib.pyplot as plt  # start-up cost: matplotlib only when drawing
    fig = goodput_figure(runs, title)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def panel_title(run: GoodputRun) -> str:
    """The plot title of one run: fabric, link rate, hop latency and the engine that timed it."""
    m = run.meta
    return f"{m['fabric']}, {m['link_rate'] / 1e9:g} Gb/s, {m['hop_latency'] * 1e9:g} ns ({m['engine']})"


def _sweep_kw(args) -> dict:
    return dict(engine=args.get("engine", "netsim"), alpha=args.get("alpha", 0.0), log=args.get("log", print))


def _square(args) -> tuple[list[GoodputRun], list[str], dict]:
    runs, rep, summ = [], [], {}
    families = args.get("families") or ["SP", "k-SP", "Bucket", "Swing", "Trivance"]
    paper = PAPER["sp-square"]
    for n in args.get("sides", [8, 16]):
        run = goodput_sweep(Fabric("torus", (n, n)), families, args.get("sizes"), ks=args.get("ks"), **_sweep_kw(args))
        runs.append(run)
        rep.append(_table(run))
        key = f"{n}x{n}"
        s, text = _gain_summary(gain_table(run, "k-SP"), "k-SP envelope")
        rep.append("  " + text)
        if key in paper["at size"]:
            at = [size for size in {r["size"] for r in run.best} if fmt_size(size) == paper["at size"][key]]
            ours = {g["size"]: g["ratio"] for g in gain_table(run, "k-SP")}
            here = f"; ours there {100 * (ours[at[0]] - 1):+.1f}%" if at and at[0] in ours else "; size not run here"
            rep.append(f"  paper {key}: max k-SP gain {paper['max k-SP gain over best baseline (%)'][key]:+.1f}% "
                       f"at {paper['at size'][key]}{here}")
        sp, bu = _best(run, "SP", 64 * KIB), _best(run, "Bucket", 64 * KIB)
        if sp and bu:
            s["sp_over_bucket_64KiB"] = sp["goodput"] / bu["goodput"]
            ref = paper["SP / Bucket at 64 KiB"].get(key)
            rep.append(f"  SP/Bucket at 64 KiB {sp['goodput'] / bu['goodput']:.2f}x"
                       + (f" (paper {key}: {ref:.2f}x)" if ref else ""))
        s["best_k"] = {fmt_size(r["size"]): r["variant"] for r in run.best if r["family"] == "k-SP"}
        summ[key] = s
        if s["best_k"]:
            rep.append("  best k per size: " + ", ".join(f"{z} {v}" for z, v in s["best_k"].items()))
    return runs, rep, summ


def _sweep(args, what: str) -> tuple[list[GoodputRun], list[str], dict]:
    runs, rep, summ = [], [], {}
    values = args.get("values") or ([100e9, 200e9, 400e9, 800e9, 1.6e12, 3.2e12] if what == "rate"
                                    else [200e-9, 400e-9, 800e-9, 1600e-9])
    fab = Fabric("torus", tuple(args.get("shape", (8, 8))))
    rep.append(f"{fab.label}: k-SP envelope over the best of Bucket/Swing/Trivance, per {what}")
    for v in values:
        kw = dict(link_rate=v) if what == "rate" else dict(hop_latency=v)
        run = goodput_sweep(fab, args.get("families") or ["k-SP", "Bucket", "Swing", "Trivance"], args.get("sizes"),
                            ks=args.get("ks"), **_sweep_kw(args), **kw)
        runs.append(run)
        g = gain_table(run, "k-SP")
        label = f"{v / 1e9:g} Gb/s" if what == "rate" else f"{v * 1e9:g} ns"
        s, text = _gain_summary(g, "k-SP")
        s["gains_pct"] = {fmt_size(r["size"]): round(100 * (r["ratio"] - 1), 2) for r in g}
        summ[label] = s
        rep.append(f"  {label:>10s} ({run.meta['engine']}): {text}")
        if g:
            rep.append("    gain per size: " + ", ".join(f"{fmt_size(r['size'])} {100 * (r['ratio'] - 1):+.0f}%"
                                                        for r in g))
    return runs, rep, summ


def _single(args, fabrics, families) -> tuple[list[GoodputRun], list[str], dict]:
    runs, rep, summ = [], [], {}
    families = args.get("families") or families
    for fab in fabrics:
        run = goodput_sweep(fab, families, args.get("sizes"), ks=args.get("ks"), **_sweep_kw(args))
        runs.append(run)
        rep.append(_table(run))
        key = "x".join(map(str, fab.shape))
        s, text = _gain_summary(gain_table(run, "SP", [f for f in families if f != "SP"]), "SP")
        big = max(r["size"] for r in run.best)
        sp_big = _best(run, "SP", big)
        if sp_big:
            s["sp_fraction_largest"] = sp_big["fraction"]
            rep.append(f"  SP at {fmt_size(big)}: {sp_big['goodput'] / 1e9:.1f} Gb/s = "
                       f"{100 * sp_big['fraction']:.1f}% of the bound")
        rep.append("  " + text)
        if (fab.kind == "torus" and len(set(fab.shape)) > 1 and run.meta["engine"] == "model"
                and any(r["family"] == "Bucket" for r in run.best)):
            rep.append(f"  caveat: Bucket on the rectangular {key} comes from the round-synchronous model, which "
                       "charges each round its slowest instance; netsim lets Bucket's instances overlap and gives "
                       "much more (256 MiB: 32x4 651 Gb/s netsim vs 423 model, 64x16 748 vs 451, paper 706); "
                       "compare Bucket with the paper only from --engine netsim (64x16: ~30 s per size)")
        summ[key] = s
    return runs, rep, summ


EXPERIMENTS = {
    "sp-square": lambda a: _square(a),
    "sp-linkrate": lambda a: _sweep(a, "rate"),
    "sp-latency": lambda a: _sweep(a, "latency"),
    "sp-rect": lambda a: _single(a, [Fabric("torus", s) for s in a.get("shapes", [(64, 16), (128, 8), (256, 4)])],
                                 ["SP", "Bucket", "Swing", "Trivance", "Ring"]),
    "sp-hyperx": lambda a: _single(a, [Fabric("hyperx", tuple(a.get("shape", (32, 32))))],
                                   ["SP", "Bucket", "Swing", "Trivance"]),
    "sp-spineleaf": lambda a: _single({**a, "sizes": a.get("sizes") or [32 * KIB] + SIZES},
                                      [Fabric("spineleaf", tuple(a.get("shape", (32, 16))))],
                                      ["SP", "Bucket", "Swing", "Trivance", "Ring", "RD"]),
}


_QUICK_SIZES = [64 * KIB, MIB, 16 * MIB]

#: Small configurations for ``quick=True``: same families and outputs, tiny fabrics and three
#: sizes (64 KiB, 1 MiB, 16 MiB); explicit arguments still override them. k-SP tries every
#: k of the torus (1..H), as in the full runs.
QUICK = {
    "sp-square": dict(sides=[4], sizes=_QUICK_SIZES),
    "sp-linkrate": dict(shape=(4, 4), values=[100e9, 1.6e12], sizes=_QUICK_SIZES),
    "sp-latency": dict(shape=(4, 4), values=[200e-9, 1600e-9], sizes=_QUICK_SIZES),
    "sp-rect": dict(shapes=[(8, 4)], sizes=_QUICK_SIZES),
    "sp-hyperx": dict(shape=(4, 4), sizes=_QUICK_SIZES),
    "sp-spineleaf": dict(shape=(4, 4), sizes=_QUICK_SIZES),
}

_COMMON = {"sizes", "engine", "alpha", "log"}
#: Values of the common arguments that are the defaults (left out of the file names).
_DEFAULTS = {"engine": "netsim", "alpha": 0.0}
#: The arguments each experiment takes besides sizes, engine, alpha and log.
OPTIONS = {"sp-square": {"sides", "families", "ks"}, "sp-linkrate": {"shape", "values", "families", "ks"},
           "sp-latency": {"shape", "values", "families", "ks"}, "sp-rect": {"shapes", "families", "ks"},
           "sp-hyperx": {"shape", "families"}, "sp-spineleaf": {"shape", "families"}}

AUTO_NOTE = ("note (--engine auto): fabrics up to 256 nodes come from netsim, larger ones from the model; for "
             "k-SP the two differ (netsim starts a message when its inputs arrive and so overlaps rounds, the "
             "model is round-synchronous): 16x16, k=2, 256 KiB takes 1.90e-5 s in netsim and 2.33e-5 s in the "
             "model, and the best k is below H in netsim at small sizes but always H in the model with alpha = 0")
QUICK_NOTE = "quick run: small fabric and three sizes, not comparable to the paper's figures"


def prepare_out(out_dir: str | Path) -> Path:
    """Create the output folder ``out_dir`` (and its parents) and check it is writable,
    before any computation.

    Raises:
        ValueError: it cannot be created (a file in the way, a parent that is not a folder)
            or written, naming the path and the reason.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: exists and is not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"--out {out}: cannot create the output folder ({e.strerror or e})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: the output folder is not writable")
    return out


def _paper_text(paper: dict) -> list[str]:
    """The paper's figures, one line per quantity (``key: 8x8 8.0, 16x16 19.0``)."""
    lines = []
    for key, val in paper.items():
        if isinstance(val, dict):
            val = ", ".join(f"{k} {v}" for k, v in val.items())
        elif isinstance(val, list):
            val = " ".join(map(str, val))
        lines.append(f"  {key}: {val}")
    return lines


def run_experiment(name: str, out_dir: str | Path, quick: bool = False, **args) -> str:
    """Run experiment ``name``, write ``<out_dir>/<stem>.json`` and ``.png``; return the report. The
    stem is the name and the settings given that differ from the defaults
    (:func:`reactccl.experiments.outputs.result_stem`: ``sp-square``, ``sp-square-sides8``,
    ``sp-square-quick``), so a run with other settings never replaces another's files.

    Args (all optional): ``quick`` (start from :data:`QUICK`'s small configuration),
    ``sizes`` (bytes), ``engine`` ("netsim"/"model"/"auto"), ``sides`` (sp-square),
    ``ks`` (depth bounds tried for k-SP; default 1..H, H always added), ``alpha`` (s per
    round, model engine), ``families`` (a subset of the experiment's families),
    ``values`` (rates in bit/s or latencies in s for the sweeps), ``shapes`` (sp-rect) /
    ``shape`` (sp-linkrate, sp-latency, sp-hyperx, sp-spineleaf), ``log`` (progress printer,
    ``None`` for silence). Which experiment takes which is :data:`OPTIONS`.

    Raises:
        ValueError: unknown experiment name, an argument the experiment does not take, an
            output folder that cannot be created (checked first), or a bad size, k or family.
    """
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}{did_you_mean(name, EXPERIMENTS)}; "
                         f"known: {', '.join(EXPERIMENTS)}")
    bad = sorted(set(args) - _COMMON - OPTIONS[name])
    if bad:
        takes = ", ".join(sorted(e for e, o in OPTIONS.items() if bad[0] in o)) or "none"
        raise ValueError(f"{name} does not take {bad[0]!r} (experiments that do: {takes})")
    out = prepare_out(out_dir)
    stem = result_stem(name, {"quick": quick, **{k: v for k, v in args.items()
                                                 if k != "log" and v != _DEFAULTS.get(k, object())}},
                       formats={"sizes": lambda b: fmt_size(b).replace(" ", ""), "values": lambda v: f"{v:g}"})
    if quick:
        args = {**QUICK[name], **args}
    runs, rep, summ = EXPERIMENTS[name](args)
    engines = list(dict.fromkeys(r.meta["engine"] for r in runs))
    notes = ([QUICK_NOTE] if quick else []) + ([AUTO_NOTE] if args.get("engine") == "auto" else [])
    doc = dict(experiment=name, quick=bool(quick), engines=engines, notes=notes, summary=summ,
               paper=PAPER.get(name, {}),
               runs=[dict(meta=r.meta, best=r.best, rows=r.rows, skipped=r.skipped) for r in runs])
    files = [out / f"{stem}.json", out / f"{stem}.png"]
    replaced = existing(files)
    files[0].write_text(json.dumps(doc, indent=1, default=float))
    _plot(runs, files[1], f"{name}{' --quick' if quick else ''}: goodput G = N(p-1)/(pT) "
                          f"(ours, {' + '.join(engines)})")
    paper = PAPER.get(name, {})
    report = ([f"== {name} ==" + (f" ({QUICK_NOTE})" if quick else "")] + rep + notes[int(quick):]
              + (["paper (SST, its text):"] + _paper_text(paper) if paper else [])
              + [f"wrote {files[0]} and {files[1]}"
                 + (" (replacing the files of an earlier run with the same settings)" if replaced else "")])
    return "\n".join(report)

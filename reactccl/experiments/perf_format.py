"""``perf``'s output: nccl-tests' table (out of place, then in place), CSV, JSON and a busbw plot.

The table's columns and widths are nccl-tests' (``src/util.cu``): size, count, type, redop, root,
then time (us), algbw, busbw (GB/s) and #wrong out of place and again in place; a number that does
not fit its column loses decimals, then goes to exponent form, as nccl-tests' ``getFloatStr`` does,
so a long time never shifts the columns. After each algorithm's block come ``Out of bounds
values`` (where checked) and ``Avg bus bandwidth``, the mean busbw over both columns of every row,
as nccl-tests averages every timed run.

Source: nccl-tests ``src/util.cu`` (``writeBenchmarkLinePreamble``, ``writeBenchmarkLineBody``,
``getFloatStr``) and ``src/common.cu`` (the bandwidth average).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .perf import PerfRow

__all__ = ["format_table", "format_csv", "perf_document", "plot_busbw", "fit", "fit_int", "CSV_COLUMNS", "SCHEMA"]

SCHEMA = "reactccl.perf/2"
#: CSV header: nccl-tests' columns with units in the names (us, GB/s), out of place first.
CSV_COLUMNS = ("algorithm", "collective", "ranks", "size_B", "count", "type", "redop", "root",
               "oop_time_us", "oop_algbw_GBps", "oop_busbw_GBps", "oop_wrong",
               "time_us", "algbw_GBps", "busbw_GBps", "wrong", "pattern", "chunks", "graphs")


# nccl-tests' header columns: size, count, type, redop, root, then time, algbw, busbw, #wrong twice
_COLUMNS = "# {:>10s}  {:>12s}  {:>8s}  {:>6s}  {:>6s}" + "  {:>7s}  {:>6s}  {:>6s}  {:>6s}" * 2


def fit(value: float, width: int) -> str:
    """``value`` right-aligned in ``width`` characters: 2 decimals if that fits, else 1, else 0,
    else exponent form (nccl-tests' ``getFloatStr``)."""
    for fmt in (f"{{:{width}.2f}}", f"{{:{width}.1f}}", f"{{:{width}.0f}}"):
        s = fmt.format(value)
        if len(s) <= width:
            return s
    return (f"{{:{width}.1e}}" if width >= 7 else f"{{:{width}.0e}}").format(value)


def fit_int(value: int, width: int) -> str:
    """``value`` right-aligned in ``width`` characters, in exponent form where its digits do not fit
    (a 2 TiB size, 2199023255552, in 12 characters: ``" 2.19902e+12"``), so no row is wider than its
    header."""
    s = f"{value:{width}d}"
    if len(s) <= width:
        return s
    for digits in range(max(width - 6, 0), -1, -1):
        s = f"{value:{width}.{digits}e}"
        if len(s) <= width:
            return s
    return s


def _half(time_s: float, algbw: float, busbw: float, wrong: int | None) -> str:
    w = "   N/A" if wrong is None else fit_int(int(wrong), 6)
    return f"  {fit(time_s * 1e6, 7)}  {fit(algbw / 1e9, 6)}  {fit(busbw / 1e9, 6)}  {w}"


def format_table(rows: Sequence[PerfRow], header: str = "") -> str:
    """The rows as nccl-tests prints them, one block per algorithm (module docstring). ``header``
    lines are printed first, each behind ``# ``; a block starts with ``# algorithm: NAME (...)``
    and the patterns it ran."""
    out = [f"# {line}" if line else "#" for line in header.splitlines()] if header else []
    for algo in dict.fromkeys(r.algorithm for r in rows):
        rs = [r for r in rows if r.algorithm == algo]
        out += ["#", f"# algorithm: {algo} ({rs[0].collective}, {rs[0].ranks} ranks)" + _patterns(rs),
                "# " + " " * 10 + "  " + " " * 12 + "  " + " " * 8 + "  " + " " * 6 + "  " + " " * 6
                + "           out-of-place                       in-place          ",
                _COLUMNS.format("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                                "algbw", "busbw", "#wrong"),
                _COLUMNS.format("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                                "(GB/s)", "")]
        for r in rs:
            out.append(f"{fit_int(r.size, 12)}  {fit_int(r.count, 12)}  {r.type:>8s}  {r.redop:>6s}  "
                       f"{fit_int(r.root, 6)}"
                       + _half(r.oop_time_s, r.oop_algbw, r.oop_busbw, r.oop_wrong)
                       + _half(r.time_s, r.algbw, r.busbw, r.wrong))
        checked = [w for r in rs for w in (r.oop_wrong, r.wrong) if w is not None]
        if checked:
            bad = sum(checked)
            out.append(f"# Out of bounds values : {bad} {'OK' if bad == 0 else 'FAILED'}")
        bws = [b for r in rs for b in (r.oop_busbw, r.busbw) if b == b]
        out.append(f"# Avg bus bandwidth    : {np.mean(bws) / 1e9 if bws else float('nan'):.6g}")
    return "\n".join(out) + "\n"


def _patterns(rs: Sequence[PerfRow]) -> str:
    """``; pattern NAME (C chunks, G chunk graphs)`` or, where the pattern changed with the size
    (``nccl-tree``'s slices), each one with the sizes it ran."""
    named = [r for r in rs if r.pattern]
    if not named:
        return ""
    names = list(dict.fromkeys(r.pattern for r in named))
    if len(names) == 1:
        r = named[0]
        return f"; pattern {r.pattern} ({r.chunks} chunks, {r.graphs} chunk graph{'s' if r.graphs != 1 else ''})"
    parts = []
    for nm in names:
        sz = [r.size for r in named if r.pattern == nm]
        span = _binary(sz[0]) if len(sz) == 1 else f"{_binary(sz[0])}..{_binary(sz[-1])}"
        parts.append(f"{nm} at {span}")
    return "; patterns by size: " + ", ".join(parts)


def format_csv(rows: Sequence[PerfRow]) -> str:
    """The rows as CSV, one line per (algorithm, size), columns :data:`CSV_COLUMNS` (times in us,
    bandwidths in GB/s = 1e9 bytes/s, an unchecked #wrong empty)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)

    def num(x: float, scale: float) -> str:
        return "" if x != x else f"{x * scale:.6g}"

    for r in rows:
        w.writerow([r.algorithm, r.collective, r.ranks, r.size, r.count, r.type, r.redop, r.root,
                    num(r.oop_time_s, 1e6), num(r.oop_algbw, 1e-9), num(r.oop_busbw, 1e-9),
                    "" if r.oop_wrong is None else r.oop_wrong,
                    num(r.time_s, 1e6), num(r.algbw, 1e-9), num(r.busbw, 1e-9), "" if r.wrong is None else r.wrong,
                    r.pattern, r.chunks, r.graphs])
    return buf.getvalue()


def perf_document(rows: Sequence[PerfRow], header: str) -> dict:
    """The JSON document: ``{"schema": "reactccl.perf/2", "header": TEXT, "rows": [PerfRow fields]}``;
    row fields are :class:`~reactccl.experiments.perf.PerfRow`'s (SI units; ``time_s``/``algbw``/
    ``busbw``/``wrong`` in place as in ``reactccl.perf/1``, ``oop_*`` out of place); NaN is null."""
    def clean(d: dict) -> dict:
        return {k: (None if isinstance(v, float) and v != v else v) for k, v in d.items()}

    return {"schema": SCHEMA, "header": header, "rows": [clean(r.to_dict()) for r in rows]}


def _binary(size: int) -> str:
    """Bytes as nccl-tests users write them: 8 B, 4 KiB, 128 MiB (binary units, up to 3 digits)."""
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << k:
            return f"{size / (1 << k):.3g} {unit}"
    return f"{size} B"


def plot_busbw(rows: Sequence[PerfRow], path: str | Path, title: str = "") -> Path:
    """Out-of-place busbw (GB/s) against message size (log scale), one line per algorithm; returns
    ``path``."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for algo in dict.fromkeys(r.algorithm for r in rows):
        rs = [r for r in rows if r.algorithm == algo]
        ax.plot([r.size for r in rs], [r.oop_busbw / 1e9 for r in rs], marker="o", markersize=3, label=algo)
    ax.set_xscale("log", base=2)
    sizes = sorted({r.size for r in rows})
    ticks = sizes[::max(1, len(sizes) // 10)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([_binary(s) for s in ticks], rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("message size")
    ax.set_ylabel("busbw, out of place (GB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path

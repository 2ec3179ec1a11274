"""Pictures of one simulated run: epoch times with REACT's pattern changes, and one epoch's flows.

``plot_epochs`` draws every epoch's time for each run given (e.g. the baseline and REACT on the
same seeded scenario) and marks the epochs where REACT's decisions took effect (a swap, or a
revert). ``plot_timeline`` draws the flows of one epoch as horizontal bars, one row per sending
rank, from the flow's start to its end, coloured by step, so a slow flow or an idle rank shows at
a glance (the picture nccl-tests users make from NCCL's proxy traces).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..trace import EpochTrace, format_bytes

__all__ = ["plot_epochs", "plot_timeline", "timeline_figure"]


def _plt():
    import matplotlib  # noqa: PLC0415 - only for pictures
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


def _time_unit(seconds: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if seconds >= scale:
            return scale, unit
    return 1e-9, "ns"


def plot_epochs(path: str | Path, runs: Sequence[tuple[str, np.ndarray]], changes: Sequence[Any] = (),
                title: str = "", warmup: int | None = None) -> Path:
    """Epoch times of one or more runs, REACT's changes marked.

    Args:
        path: the PNG to write.
        runs: ``(label, durations)`` pairs; durations in seconds, shape ``(E,)``.
        changes: REACT decisions (objects with ``effective_epoch`` and ``kind``, as in
            ``reactccl.tuner.log.Decision``): a dashed green line where a swap took effect,
            an orange one where a revert did; one whose epoch is past the longest run never took
            effect and is not drawn.
        title: the figure title.
        warmup: shade epochs ``0..warmup-1`` (left out of the comparison).

    Returns:
        ``path`` as a Path.
    """
    plt = _plt()
    peak = max((float(np.max(d)) for _, d in runs if len(d)), default=1.0)
    scale, unit = _time_unit(peak)
    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=120)
    for label, d in runs:
        ax.plot(np.arange(len(d)), np.asarray(d) / scale, marker=".", markersize=3, linewidth=1.2, label=label)
    seen = set()
    epochs = max((len(d) for _, d in runs), default=0)
    for dec in changes:
        if dec.effective_epoch >= epochs:      # decided too late to run
            continue
        kind = getattr(dec, "kind", "transform")
        color = "tab:orange" if kind == "revert" else "tab:green"
        lab = ("REACT revert" if kind == "revert" else "REACT swap takes effect")
        ax.axvline(dec.effective_epoch, color=color, linestyle="--", linewidth=1,
                   label=None if lab in seen else lab)
        seen.add(lab)
    if warmup:
        ax.axvspan(-0.5, warmup - 0.5, color="0.92", zorder=0, label="warm-up")
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"epoch time ({unit})")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_timeline(path: str | Path, trace: EpochTrace, title: str = "", max_flows: int = 20000) -> Path:
    """The flows of one epoch as bars: row = sending rank, bar = [start, end], colour = step; each
    bar named by its receiver (``→3``) where the name fits inside the bar (:func:`timeline_figure`).

    Args:
        path: the PNG to write.
        trace: the epoch (start/end per flow in seconds from the epoch start).
        title: the figure title (the epoch number and message size are appended).
        max_flows: refuse (ValueError) beyond this many flows; the picture would be a smear.

    Returns:
        ``path`` as a Path.
    """
    plt = _plt()
    fig = timeline_figure(trace, title, max_flows)
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


#: Font size (points) of the receiver names inside the bars; legible at the figure's 120 dpi.
LABEL_POINTS = 7.0


def _fits(text_px: tuple[float, float], box_px: tuple[float, float]) -> bool:
    """Whether a label of ``(width, height)`` pixels fits a bar of ``(width, height)`` pixels, with
    a pixel to spare each way."""
    return text_px[0] + 2 <= box_px[0] and text_px[1] + 2 <= box_px[1]


def _label_bars(fig, ax, bars, trace: EpochTrace, colors) -> int:
    """Name each bar's receiver inside it where the name fits (measured in pixels with the figure's
    renderer, after layout) and does not touch a label already drawn in its lane (bars of one lane
    overlap where a rank's pipelined slices to one receiver do); other bars keep no label. Returns
    labels drawn."""
    p = trace.pattern
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    probe = ax.text(0, 0, "→0", fontsize=LABEL_POINTS)
    drawn = 0
    boxes = [bar.get_window_extent(renderer) for bar in bars]
    right: dict[float, float] = {}          # lane (bar centre in pixels) -> right edge of its last label
    for i in sorted(range(len(bars)), key=lambda k: (round(boxes[k].y0, 1), boxes[k].x0)):
        bar, box = bars[i], boxes[i]
        probe.set_text(f"→{p.dst[i]}")
        ext = probe.get_window_extent(renderer)
        if not _fits((ext.width, ext.height), (box.width, box.height)):
            continue
        key, x0 = round(box.y0, 1), (box.x0 + box.x1 - ext.width) / 2
        if x0 < right.get(key, -1e9) + 2:
            continue
        right[key] = x0 + ext.width
        r, g, b = colors[i][:3]
        dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height() / 2, f"→{p.dst[i]}",
                ha="center", va="center", fontsize=LABEL_POINTS, color="white" if dark else "black")
        drawn += 1
    probe.remove()
    return drawn


def timeline_figure(trace: EpochTrace, title: str = "", max_flows: int = 20000):
    """The matplotlib figure of :func:`plot_timeline` (for callers that show or test it).

    Raises:
        ValueError: more than ``max_flows`` flows.
    """
    p = trace.pattern
    F = p.num_flows
    if max_flows < F:
        raise ValueError(f"--timeline: epoch has {F} flows, more than {max_flows} bars can show; use fewer ranks "
                         "or --pack")
    plt = _plt()
    scale, unit = _time_unit(max(trace.duration, 1e-12))
    n = p.num_ranks
    T = max(p.num_steps, 1)
    cmap = plt.get_cmap("viridis", T)
    # flows of one sender overlap in time: one lane per destination it sends to, centred on its row
    lane = np.zeros(F)
    k_max = 1
    for r in range(n):
        sel = np.flatnonzero(p.src == r)
        dsts, idx = np.unique(p.dst[sel], return_inverse=True)
        k_max = max(k_max, len(dsts))
        lane[sel] = idx - (len(dsts) - 1) / 2
    # a lane tall enough for a label (LABEL_POINTS at 120 dpi is about 12 px: 0.17 in with room), up to
    # a 40-inch figure; beyond that lanes get thinner and their labels are left out
    fig, ax = plt.subplots(figsize=(10, min(40.0, max(2.5, 0.2 * n * k_max + 1.6))), dpi=120)
    height = min(0.8 / k_max, 0.5)
    lane *= height
    colors = cmap(p.step)
    bars = ax.barh(p.src + lane, (trace.end - trace.start) / scale, left=trace.start / scale,
                   height=height * 0.9, color=colors, edgecolor="white", linewidth=0.4)
    for r in range(n - 1):
        ax.axhline(r + 0.5, color="0.85", linewidth=0.6)
    ax.set_yticks(range(n))
    ax.set_yticklabels([f"rank {r}" for r in range(n)], fontsize=7 if n > 16 else 8)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(0, trace.duration / scale * 1.01 if trace.duration > 0 else 1)
    ax.set_xlabel(f"time in the epoch ({unit})\na bar is a flow from its first byte sent to its last byte received, "
                  "in its sender's row (a lane per receiver; →r names the receiver where it fits)", fontsize=8)
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(-0.5, T - 0.5))
    cb = fig.colorbar(sm, ax=ax, pad=0.01)
    cb.set_label("step")
    if T <= 12:
        cb.set_ticks(range(T))
    ax.set_title(f"{title}: epoch {trace.epoch}, {F} flows, message {format_bytes(trace.message_bytes)}"
                 if title else f"epoch {trace.epoch}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    _label_bars(fig, ax, bars, trace, colors)
    return fig

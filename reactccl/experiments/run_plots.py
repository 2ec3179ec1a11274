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

__all__ = ["plot_epochs", "plot_timeline"]


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
    """The flows of one epoch as bars: row = sending rank, bar = [start, end], colour = step.

    Args:
        path: the PNG to write.
        trace: the epoch (start/end per flow in seconds from the epoch start).
        title: the figure title (the epoch number and message size are appended).
        max_flows: refuse (ValueError) beyond this many flows; the picture would be a smear.

    Returns:
        ``path`` as a Path.
    """
    p = trace.pattern
    F = p.num_flows
    if F > max_flows:
        raise ValueError(f"--timeline: epoch has {F} flows, more than {max_flows} bars can show; use fewer ranks "
                         "or --pack")
    plt = _plt()
    scale, unit = _time_unit(max(trace.duration, 1e-12))
    n = p.num_ranks
    T = max(p.num_steps, 1)
    cmap = plt.get_cmap("viridis", T)
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.32 * n + 1.4)), dpi=120)
    # flows of one sender overlap in time: one lane per destination it sends to, centred on its row
    lane = np.zeros(F)
    k_max = 1
    for r in range(n):
        sel = np.flatnonzero(p.src == r)
        dsts, idx = np.unique(p.dst[sel], return_inverse=True)
        k_max = max(k_max, len(dsts))
        lane[sel] = idx - (len(dsts) - 1) / 2
    height = min(0.8 / k_max, 0.5)
    lane *= height
    ax.barh(p.src + lane, (trace.end - trace.start) / scale, left=trace.start / scale,
            height=height * 0.9, color=cmap(p.step), edgecolor="white", linewidth=0.4)
    for r in range(n - 1):
        ax.axhline(r + 0.5, color="0.85", linewidth=0.6)
    if F <= 160:                      # few flows: name each bar's receiver
        for i in range(F):
            ax.text((trace.start[i] + trace.end[i]) / 2 / scale, p.src[i] + lane[i], f"→{p.dst[i]}",
                    ha="center", va="center", fontsize=6, color="white" if p.step[i] < T / 2 else "black")
    ax.set_yticks(range(n))
    ax.set_yticklabels([f"rank {r}" for r in range(n)], fontsize=7 if n > 16 else 8)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(0, trace.duration / scale * 1.01 if trace.duration > 0 else 1)
    ax.set_xlabel(f"time in the epoch ({unit}); a bar is a flow from its first byte sent to its last byte "
                  "received, in the row of its sender (one lane per receiver)", fontsize=8)
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(-0.5, T - 0.5))
    cb = fig.colorbar(sm, ax=ax, pad=0.01)
    cb.set_label("step")
    if T <= 12:
        cb.set_ticks(range(T))
    ax.set_title(f"{title}: epoch {trace.epoch}, {F} flows, message {format_bytes(trace.message_bytes)}"
                 if title else f"epoch {trace.epoch}", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path

"""Metrics of a run: epoch times after a warm-up, algorithm bandwidth, improvement, summaries.

REACT §7.1: algbw = S / t (message size over the collective's time); §7.3 measures
the mean algbw after epoch 25; Fig 13 uses the p95 epoch time. Improvement of an
arm over the baseline on the same scenario is ``(algbw_arm / algbw_baseline - 1) * 100`` %.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["default_warmup", "epoch_metrics", "improvement", "summarize"]


def default_warmup(epochs: int, warmup: int = 25) -> int:
    """The warm-up to leave out when none is given: ``warmup`` (the paper's 25 epochs, §7.3) if the
    run is longer, else a quarter of the run (so a short run still measures 3/4 of its epochs).
    Example: ``default_warmup(100) == 25``, ``default_warmup(10) == 2``."""
    return warmup if epochs > warmup else max(epochs, 0) // 4


def epoch_metrics(durations: Sequence[float] | np.ndarray, message_bytes: float, warmup: int) -> dict[str, float]:
    """Metrics of one job's epoch times (s), from epoch ``warmup`` on.

    Returns:
        ``mean_time``, ``p95_time`` (s); ``mean_algbw`` (the mean over epochs of
        S / t_e, bytes/s, the paper's "mean algorithm bandwidth"); ``p95_algbw``
        (S / p95 time, bytes/s, the algbw of the p95 epoch); ``epochs`` measured.

    Raises:
        ValueError: no epoch left after the warm-up, or a non-positive time.
    """
    d = np.asarray(durations, dtype=np.float64)[int(warmup):]
    if d.size == 0:
        raise ValueError(f"epoch_metrics: no epochs after warmup={warmup} (got {len(durations)} epochs)")
    if not (d > 0).all():
        raise ValueError(f"epoch_metrics: epoch times must be > 0 s, got min {d.min()}")
    p95 = float(np.percentile(d, 95))
    return {"mean_time": float(d.mean()), "p95_time": p95, "mean_algbw": float(np.mean(message_bytes / d)),
            "p95_algbw": float(message_bytes / p95), "epochs": int(d.size)}


def improvement(algbw: float, baseline_algbw: float) -> float:
    """Percent improvement ``(algbw / baseline_algbw - 1) * 100``.

    Raises:
        ValueError: a non-positive baseline.
    """
    if not baseline_algbw > 0:
        raise ValueError(f"improvement: baseline algbw must be > 0, got {baseline_algbw}")
    return (float(algbw) / float(baseline_algbw) - 1.0) * 100.0


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Mean, min, max, median and count of improvements (%); ``values`` kept in order.

    ``max`` is the paper's "up to X% in the worst case scenario" (the scenario where the
    congestion hurt most); ``min`` is the worst result for REACT.

    Raises:
        ValueError: an empty list.
    """
    v = np.asarray(list(values), dtype=np.float64)
    if v.size == 0:
        raise ValueError("summarize: no values")
    return {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()),
            "median": float(np.median(v)), "n": int(v.size), "values": [float(x) for x in v]}

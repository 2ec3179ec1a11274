"""Keep or revert a trial pattern on evidence that beats the noise (REACT §5.4.2, made robust).

The paper keeps a trial when one batch mean of the epoch times beats the previous pattern's by
(1 + τ_r). With ECMP one epoch varies by several percent, so two 6-epoch means misjudge many
trials. :func:`trial_verdict` asks instead whether ``mean_prev - (1 + τ) mean_trial`` is
positive, with a Welch statistic (unequal variances):

    t = (m_p - (1 + τ) m_t) / sqrt(v_p / n_p + (1 + τ)^2 v_t / n_t)

``t > z``: keep; ``t < -z``: revert; in between the trial runs another batch, and after the last
allowed batch the sign of ``t`` decides (the point estimate against the same threshold, so the
verdict converges to the noise-free one as the trial grows). With no spread at all (a
deterministic executor) the sign decides at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["trial_verdict"]


def trial_verdict(prev_times: Sequence[float], trial_times: Sequence[float], tau: float, z: float = 2.0,
                  final: bool = False) -> tuple[str, float]:
    """``("keep" | "revert" | "extend", t)`` for a trial (epoch times in s; see the module docstring).

    Args:
        prev_times: epoch times of the pattern before the trial (at least 1).
        trial_times: epoch times of the trial (at least 1).
        tau: required relative gain τ_r.
        z: decision threshold on ``t``.
        final: no more batches allowed: never "extend".

    Raises:
        ValueError: an empty sample.
    """
    p, q = np.asarray(prev_times, dtype=np.float64), np.asarray(trial_times, dtype=np.float64)
    if not p.size or not q.size:
        raise ValueError(f"trial_verdict: need epoch times of both patterns, got {p.size} and {q.size}")
    k = 1.0 + float(tau)
    diff = float(p.mean() - k * q.mean())
    vp = float(p.var(ddof=1)) if p.size > 1 else 0.0
    vq = float(q.var(ddof=1)) if q.size > 1 else 0.0
    se = float(np.sqrt(vp / p.size + k * k * vq / q.size))
    scale = max(float(p.mean()), 1e-300)
    if se <= 1e-9 * scale:
        return ("keep" if diff > 0 else "revert"), float(np.sign(diff)) * np.inf if diff else 0.0
    t = diff / se
    if t > z:
        return "keep", t
    if t < -z:
        return "revert", t
    if final:
        return ("keep" if t > 0 else "revert"), t
    return "extend", t

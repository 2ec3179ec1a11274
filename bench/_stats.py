"""Paired ratios and a distribution-free confidence interval for their median (the benches' noise test).

A bench that times method A beside a baseline B on a shared machine sees both move with the load.
Timing them in the same rep, one right after the other, and taking the ratio per rep cancels most
of that drift; the median of those ratios then has a confidence interval that needs no model of
the noise: with n ratios, the interval between the j-th and (n + 1 - j)-th smallest holds the true
median with probability 1 - 2 P(Binomial(n, 1/2) < j) (Conover, *Practical Nonparametric
Statistics*, §3.2), whatever the ratios' distribution. A target is then *met* when the whole
interval lies at or under it, *missed* when the whole interval lies over it, and *inside the noise*
otherwise: more reps narrow the interval.

The order of the methods within a rep matters too: a rotating order keeps each method's
predecessor fixed, and what ran just before moves a method's time (at 16 MB on 4 Gloo ranks, two
identical ring executors read 1.16x [1.12-1.18] and 1.11x [1.08-1.15] against ``all_reduce`` in one
run: one always ran right after ``all_reduce``). :func:`rep_order` shuffles the order per rep from
a seed that every rank computes alike.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from scipy.stats import binom

__all__ = ["rep_order", "paired_ratios", "median_ci", "verdict", "band_verdict", "segment_pairs", "format_ci"]


def rep_order(names: Sequence[str], rnd: int, rep: int) -> list[str]:
    """``names`` shuffled for rep ``rep`` of round ``rnd``: the same list on every rank (seeded by
    the two numbers only), a different predecessor for each method from rep to rep."""
    order = list(names)
    random.Random(1_000_003 * rnd + rep).shuffle(order)
    return order


def paired_ratios(times: Sequence[Sequence[float]], base: Sequence[Sequence[float]]) -> list[float]:
    """Per-rep ratios ``times[round][rep] / base[round][rep]`` over all rounds, flattened.

    Raises:
        ValueError: the two have different shapes, a base time is not positive, or a time is not
            finite (named by round and rep).
    """
    if len(times) != len(base):
        raise ValueError(f"paired_ratios: {len(times)} rounds against {len(base)} baseline rounds")
    out = []
    for i, (r, b) in enumerate(zip(times, base)):
        if len(r) != len(b):
            raise ValueError(f"paired_ratios: round {i} has {len(r)} reps against {len(b)} baseline reps")
        for j, (x, y) in enumerate(zip(r, b)):
            if not (y > 0 and math.isfinite(y)):
                raise ValueError(f"paired_ratios: baseline time {y!r} at round {i}, rep {j} is not positive and finite")
            if not (x >= 0 and math.isfinite(x)):
                raise ValueError(f"paired_ratios: time {x!r} at round {i}, rep {j} is not finite and >= 0")
            out.append(x / y)
    return out


def median_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """``(median, low, high)``: the sample median and an order-statistic interval that holds the
    true median with probability at least ``level`` (binomial, distribution-free; module docstring).

    With too few values for ``level`` (n < 6 at 95%) the interval is the whole sample range, which
    then holds the median with less than ``level``.

    Raises:
        ValueError: no values, or ``level`` outside (0, 1).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"median_ci: level {level!r} is not in (0, 1)")
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("median_ci: no values")
    med = xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
    # the largest j with 2 P(B < j) <= 1 - level, B ~ Binomial(n, 1/2); j >= 1
    j = int(binom.ppf((1.0 - level) / 2.0, n, 0.5))
    while j >= 1 and 2.0 * binom.cdf(j - 1, n, 0.5) > 1.0 - level:
        j -= 1
    while j < (n + 1) // 2 and 2.0 * binom.cdf(j, n, 0.5) <= 1.0 - level:   # ppf stops short where a tail is exact
        j += 1
    j = max(j, 1)
    return med, xs[j - 1], xs[n - j]


def verdict(low: float, high: float, target: float) -> str:
    """``met`` (the interval is at or under ``target``), ``missed`` (over it) or ``inside noise``."""
    if high <= target:
        return "met"
    if low > target:
        return "missed"
    return "inside noise"


def band_verdict(low: float, high: float, tol: float) -> str:
    """For a ratio that should be 1: ``met`` when the whole interval lies in ``[1 - tol, 1 + tol]``,
    ``missed`` when it lies wholly outside, ``inside noise`` otherwise."""
    if 1.0 - tol <= low and high <= 1.0 + tol:
        return "met"
    if high < 1.0 - tol or low > 1.0 + tol:
        return "missed"
    return "inside noise"


def segment_pairs(times: Sequence[float], base: Sequence[float], segment: int, skip: int = 0,
                  drop: int = 1) -> tuple[list[float], list[float]]:
    """Two arms run as alternating segments of ``segment`` epochs (epoch ``k`` of round ``r`` at
    index ``r * segment + k`` of each flat list): epochs drop..segment-1 of every round from
    ``skip`` on, for both arms, paired by position. The first epoch of a segment follows the other
    arm's segment, so whatever that arm left running (a tuner thread's round) falls on it: ``drop=1``
    (the default) leaves it out; ``drop=0`` keeps every epoch.

    Raises:
        ValueError: the arms differ in length, are not whole segments, ``drop`` is not in
            ``0..segment-1``, or ``skip`` leaves no round.
    """
    if not 0 <= drop < segment:
        raise ValueError(f"segment_pairs: drop {drop} leaves no epoch of a segment of {segment}")
    if len(times) != len(base) or len(times) % segment:
        raise ValueError(f"segment_pairs: {len(times)} and {len(base)} epochs are not whole segments of {segment}")
    rounds = len(times) // segment
    if not 0 <= skip < rounds:
        raise ValueError(f"segment_pairs: skip {skip} is not in 0..{rounds - 1} (rounds)")
    keep = [r * segment + k for r in range(skip, rounds) for k in range(drop, segment)]
    return [times[i] for i in keep], [base[i] for i in keep]


def format_ci(med: float, low: float, high: float, digits: int = 2) -> str:
    """``1.08x [1.03-1.12]``."""
    return f"{med:.{digits}f}x [{low:.{digits}f}-{high:.{digits}f}]"

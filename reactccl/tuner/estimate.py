"""What each rank's links and each (src, dst) pair deliver, learned from FCTs only (REACT §5.4.1).

:class:`LinkModel` explains every observed flow by fair sharing of the links it crosses. A flow of
``b`` bytes that took ``FCT`` seconds ran at ``x = 8 b / FCT`` bit/s; against the job's line rate
``C`` it behaved as if it shared its bottleneck with ``n = C / x`` equal flows (itself included).
The model says

    n = g[s, d] x max(out_t(s) + ps[s], in_t(d) + pr[d])

where ``out(s)`` and ``in(d)`` are the job's own flows on the sending and receiving host link
while the flow runs — its *time-averaged concurrency* (:func:`mean_concurrency`: flows of
different steps overlap in a pipelined tree, so a step's degree alone undercounts), ``ps[s]`` / ``pr[d]`` are the extra flows (background traffic, a slow host
link) that the sending / receiving host link carries, and ``g[s, d] >= 1`` is what the pair's
path through the fabric costs beyond both host links (ECMP collisions, a degraded core cable).
The model is fitted twice, with the time-averaged concurrency and with the plain step degrees,
and keeps the one that explains the observations better (:attr:`LinkModel.concurrency`).
Then a flow of a new pattern takes ``8 b n / C`` seconds. For a new pattern the concurrency is
not observed: it is taken first from the step degrees, the pattern is scheduled with those FCTs
(:func:`~reactccl.tuner.paths.schedule`), and the concurrency of that schedule gives the final
FCTs (one refinement).

Fitting, from the history of ``(pattern, fct, bytes)`` observations:

1. ``C``: the 90th percentile of ``x x max(out, in)`` (observed concurrency) over all flows (most flows of a job run
   uncongested, sharing only with the job's own flows).
2. ``pr[d]``: the ``q``-quantile over the flows into ``d`` of ``n - in`` (>= 0): extra load on a
   receive link shows in every flow into it. ``ps[s]`` likewise over the flows out of ``s``,
   where a flow the receive side already explains (``n <= 1.1 (in + pr[d])``) counts as 0
   excess; then ``pr`` is fitted again with the flows the send side explains counted as 0. A
   rank that only ever sends to a congested receiver is thus not blamed for it, even when a
   few of those flows are slower than the receiver explains (real TCP flows into a shared
   downlink are: a quantile over the unexplained flows alone blamed their senders).
3. ``g[s, d]``: the mean over the pair's observations of ``n / max(out + ps, in + pr)``, at least
   1, shrunk toward the mean ``g0`` of that ratio over all observed flows by twice its standard
   error (a pair differs from the fabric's typical cost only as far as its evidence beats its
   noise: per-epoch ECMP draws make single observations meaningless); a pair seen once or never
   gets ``g0`` (neither free nor penalised), and so does a pair that cannot be told from its
   links: its sender was seen sending to no other rank, or its receiver receiving from no other.

Latency (α) is not modelled separately: it is folded into ``C``, which is right for the
bandwidth-bound messages REACT tunes (MB-sized chunks) and conservative for small ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..pattern import CollectivePattern
from .kernels import _mean_concurrency
from .paths import schedule

__all__ = ["LinkModel", "Observation", "mean_concurrency", "step_degrees"]


def mean_concurrency(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Time-averaged number of flows of the same ``group`` (e.g. the same source rank) running
    while each flow runs, itself included: ``∫ count(t) dt / (end - start)`` over the flow's
    interval, shape ``(F,)``; 1 for a flow of zero length. O(F log F) (one sweep per group).

    Example: flows [0, 2] and [1, 3] of one group give 1.5 each; a flow [0, 4] with [1, 3]
    inside gives 1.5 and 2."""
    F = len(group)
    if F == 0:
        return np.zeros(0)
    g = np.concatenate([group, group]).astype(np.int64)
    t = np.concatenate([start, end]).astype(np.float64)
    delta = np.concatenate([np.ones(F), -np.ones(F)])
    order = np.lexsort((-delta, t, g))
    ts, ds = t[order], delta[order]
    count = np.cumsum(ds)                      # each group returns to 0 before the next begins
    integral = np.concatenate([[0.0], np.cumsum(count[:-1] * np.diff(ts))])
    pos = np.empty(2 * F, dtype=np.int64)
    pos[order] = np.arange(2 * F)
    span = integral[pos[F:]] - integral[pos[:F]]
    dur = np.asarray(end, dtype=np.float64) - np.asarray(start, dtype=np.float64)
    return np.where(dur > 0, span / np.where(dur > 0, dur, 1.0), 1.0)


def step_degrees(pattern: CollectivePattern) -> tuple[np.ndarray, np.ndarray]:
    """``(out, in)`` per flow, shape ``(F,)`` each: flows the pattern sends out of the flow's
    source and into its destination at the flow's step (the flow included)."""
    indeg, outdeg = pattern.degrees()
    return outdeg[pattern.step, pattern.src], indeg[pattern.step, pattern.dst]


def _group_quantile(keys: np.ndarray, vals: np.ndarray, n: int, q: float) -> np.ndarray:
    """The ``q``-quantile (lower, by rank) of ``vals`` per key in ``0..n-1``, 0 for empty keys."""
    out = np.zeros(n)
    if not keys.size:
        return out
    order = np.lexsort((vals, keys))
    k, v = keys[order], vals[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:], len(k)]
    pick = starts + np.floor(q * (ends - starts - 1)).astype(np.int64)
    out[k[starts]] = v[pick]
    return out


def _fit(N: int, s: np.ndarray, d: np.ndarray, o: np.ndarray, i: np.ndarray, x: np.ndarray,
         q: float) -> dict:
    """Steps 1-3 of the module docstring for per-flow concurrency ``o``/``i`` and rates ``x``."""
    line_rate = float(np.percentile(x * np.maximum(o, i), 90))
    n = line_rate / x
    pr = np.maximum(_group_quantile(d, n - i, N, q), 0.0)
    # a flow the other side explains shows no excess on this side: its excess counts as 0, and
    # the quantile runs over all of the rank's flows (over the unexplained ones alone, a few
    # slow epochs of flows into a congested receiver would blame their sender)
    free_r = n > 1.1 * (i + pr[d])
    ps = np.maximum(_group_quantile(s, np.where(free_r, n - o, 0.0), N, q), 0.0)
    free_s = n > 1.1 * (o + ps[s])
    pr = np.maximum(_group_quantile(d, np.where(free_s, n - i, 0.0), N, q), 0.0)
    base = np.maximum(o + ps[s], i + pr[d])
    ratio = np.maximum(n / base, 1.0)
    key = s * N + d
    cnt = np.bincount(key, minlength=N * N)
    tot = np.bincount(key, weights=ratio, minlength=N * N)
    sq = np.bincount(key, weights=ratio * ratio, minlength=N * N)
    seen = cnt > 0
    g0 = float(ratio.mean())
    mean = tot / np.maximum(cnt, 1)
    var = np.maximum(sq / np.maximum(cnt, 1) - mean * mean, 0.0) * cnt / np.maximum(cnt - 1, 1)
    se = np.where(cnt > 1, np.sqrt(var / np.maximum(cnt, 1)), np.inf)
    # a pair differs from the fabric's typical cost only as far as its evidence beats its noise
    shift = np.sign(mean - g0) * np.maximum(np.abs(mean - g0) - 2.0 * se, 0.0)
    # ... and only where the pair can be told from its two links: its receiver was seen with
    # another sender and its sender with another receiver (in a ring every rank has one of
    # each, so a slow pair and a slow link look the same, and moving the pair would only
    # move the blame)
    seen2 = seen.reshape(N, N)
    ident = ((seen2.sum(axis=1) >= 2)[:, None] & (seen2.sum(axis=0) >= 2)[None, :]).reshape(-1)
    g = np.maximum(np.where(seen & ident & np.isfinite(se), g0 + shift, g0), 1.0)
    error = float(np.mean(np.abs(np.log(g[key] * base / n))))
    return {"line_rate": line_rate, "ps": ps, "pr": pr, "pair_seen": seen, "default_factor": g0,
            "pair_factor": g, "error": error}


class Observation(NamedTuple):
    """One epoch's flows as :class:`LinkModel` reads them (built once per epoch with :meth:`of`, so
    a model refitted every batch over the last H epochs does not redo it): the flows that carried
    bytes, their endpoints, rates (bit/s), time-averaged concurrency at the sender and receiver
    (:func:`mean_concurrency`) and step degrees (:func:`step_degrees`), each shape ``(F_live,)``."""

    src: np.ndarray
    dst: np.ndarray
    rate: np.ndarray
    conc_out: np.ndarray
    conc_in: np.ndarray
    deg_out: np.ndarray
    deg_in: np.ndarray

    @classmethod
    def of(cls, pattern: CollectivePattern, start: np.ndarray, end: np.ndarray, nbytes: np.ndarray) -> "Observation":
        """From an epoch's ``pattern`` and per-flow ``start``/``end`` (s) and ``nbytes``, shapes ``(F,)``."""
        start, end = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
        fct, nbytes = end - start, np.asarray(nbytes, dtype=np.float64)
        live = (nbytes > 0) & (fct > 0)
        s_, e_ = start[live], end[live]
        o, i = step_degrees(pattern)
        # the compiled twin of mean_concurrency (the same operations; tests/test_tuner_kernels.py)
        return cls(pattern.src[live], pattern.dst[live], nbytes[live] * 8.0 / fct[live],
                   _mean_concurrency(np.asarray(pattern.src[live], np.int64), s_, e_),
                   _mean_concurrency(np.asarray(pattern.dst[live], np.int64), s_, e_), o[live], i[live])


class LinkModel:
    """Fair-share model of the job's links fitted to observed FCTs (see the module docstring).

    Args:
        num_ranks: N.
        observations: ``(pattern, start, end, bytes)`` per epoch; start/end in s (as
            :class:`~reactccl.trace.EpochTrace` has them), bytes per flow, shapes ``(F,)``; or
            the same as :class:`Observation` (prepared once per epoch).
        quantile: ``q`` of step 2 (0.25: a link's load is what most of its flows saw, robust to a
            few flows slowed elsewhere).

    Attributes:
        line_rate: ``C`` in bit/s.
        ps, pr: extra flows on each rank's send / receive link, shape ``(N,)``.
        pair_factor: ``g`` for every pair, shape ``(N * N,)`` (index ``s * N + d``).
        pair_seen: observed pairs, shape ``(N * N,)``.
        concurrency: "time" or "step": the measure of a flow's sharing that fits the observations
            better (mean absolute log error of the fitted ``n``, in-sample); "time" is how a
            fair-share network behaves, "step" how an executor that shares by step degree does.

    Raises:
        ValueError: no observations, or none carrying bytes.
    """

    def __init__(self, num_ranks: int,
                 observations: Sequence[tuple[CollectivePattern, np.ndarray, np.ndarray] | Observation],
                 quantile: float = 0.25) -> None:
        if not observations:
            raise ValueError("LinkModel: no observations")
        N = self.num_ranks = int(num_ranks)
        obs = [o if isinstance(o, Observation) else Observation.of(*o) for o in observations]
        src, dst, rate = [o.src for o in obs], [o.dst for o in obs], [o.rate for o in obs]
        conc = ([o.conc_out for o in obs], [o.conc_in for o in obs])
        deg = ([o.deg_out for o in obs], [o.deg_in for o in obs])
        s, d, x = np.concatenate(src), np.concatenate(dst), np.concatenate(rate)
        if not x.size:
            raise ValueError("LinkModel: no observed flow carried bytes")
        fits = {}
        for mode, (oo, ii) in (("time", conc), ("step", deg)):
            fits[mode] = _fit(N, s, d, np.concatenate(oo).astype(np.float64),
                              np.concatenate(ii).astype(np.float64), x, float(quantile))
        # the sharing that explains the observations better (smaller mean |log error|, in-sample)
        self.concurrency = "step" if fits["step"]["error"] < 0.9 * fits["time"]["error"] - 1e-12 else "time"
        for k, v in fits[self.concurrency].items():
            setattr(self, k, v)

    def _n(self, pattern: CollectivePattern, o: np.ndarray, i: np.ndarray) -> np.ndarray:
        s, d = pattern.src, pattern.dst
        return self.pair_factor[s * self.num_ranks + d] * np.maximum(o + self.ps[s], i + self.pr[d])

    def shares(self, pattern: CollectivePattern, flow_bytes: np.ndarray | None = None) -> np.ndarray:
        """Predicted ``n`` (equal flows sharing each flow's bottleneck) of ``pattern``'s flows,
        shape ``(F,)``: from the step degrees, refined once by the concurrency of the schedule
        those imply (needs ``flow_bytes``; without it the step degrees alone)."""
        o, i = step_degrees(pattern)
        n = self._n(pattern, o, i)
        if flow_bytes is None or not pattern.num_flows or self.concurrency == "step":
            return n
        w = np.asarray(flow_bytes, dtype=np.float64) * 8.0 * n / self.line_rate
        finish, _ = schedule(pattern, w)
        start = finish - w
        return self._n(pattern, mean_concurrency(pattern.src, start, finish),
                       mean_concurrency(pattern.dst, start, finish))

    def predict(self, pattern: CollectivePattern, flow_bytes: np.ndarray) -> np.ndarray:
        """Predicted FCTs (s) of ``pattern``'s flows carrying ``flow_bytes`` bytes, shape ``(F,)``."""
        b = np.asarray(flow_bytes, dtype=np.float64)
        return b * 8.0 * self.shares(pattern, b) / self.line_rate

    def loaded_ranks(self, threshold: float = 0.5) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Ranks whose send / receive link carries at least ``threshold`` extra flows: the
        congestion the model sees, used as the evidence a ban depends on."""
        return (tuple(np.flatnonzero(self.ps >= threshold).tolist()),
                tuple(np.flatnonzero(self.pr >= threshold).tolist()))

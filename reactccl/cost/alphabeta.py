"""The α-β (Hockney) cost model of a pattern: lock-step, and data-driven with NIC sharing.

Units: message and flow sizes in bytes, α in seconds (per message latency), β in seconds per
byte (the inverse link bandwidth: 100 Gbit/s is β = 8e-11 s/B), times in seconds.

* :func:`hockney_time` — the textbook lock-step model: step t costs α + β·b_t, where b_t is
  the most bytes any rank sends or receives in step t, and steps run one after another.
* :func:`alpha_beta_schedule` — the same Hockney cost with contention at the endpoints, run
  data-driven: every rank has one injection and one ejection link of bandwidth 1/β; at any
  moment every flow active on a link gets an equal share of it (external flows into or out
  of a rank count as permanently active there), so a flow sends at
  ``1 / (β · max(flows on its injection link, flows on its ejection link))`` bytes/s,
  recomputed whenever a flow starts or finishes. A flow starts when all its dependencies
  (:meth:`CollectivePattern.dependencies`) have arrived and, in step order (the default,
  :mod:`reactccl.pattern.order`), when its rank's sends of the previous sending step in
  the same chunk graph have sent their last byte; it arrives α after its last byte.
  This is the model of REACT §4.3 (576 µs / 656 µs for the 16-rank tree) and the execution
  model of the simulator; it differs from :mod:`reactccl.netsim` only in the network
  (one injection and one ejection link per rank, no fabric, α per flow instead of per-hop
  latency). ``order="data"`` drops the step-order condition.

Source: Hockney (1994); REACT §4.3 and its footnotes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..pattern import CollectivePattern
from ..pattern.order import check_order, send_groups
from ..trace import EpochTrace

__all__ = ["hockney_step_times", "hockney_time", "alpha_beta_schedule", "AlphaBetaSchedule"]

_ABS_TOL = 1e-15      # seconds: flows finishing within this of an event finish at it


def _check_params(message_bytes: float, alpha: float, beta: float) -> tuple[float, float, float]:
    vals = {"message_bytes": message_bytes, "alpha": alpha, "beta": beta}
    for name, v in vals.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not np.isfinite(v) or v < 0:
            raise ValueError(f"{name}: expected a finite number >= 0, got {v!r}")
    return float(message_bytes), float(alpha), float(beta)


def hockney_step_times(pattern: CollectivePattern, message_bytes: float, alpha: float,
                       beta: float) -> np.ndarray:
    """Lock-step Hockney time of every step: ``α + β · max over ranks of max(bytes sent, bytes
    received)`` in that step, shape ``(T,)`` in seconds (0 for a step without flows).

    Raises:
        ValueError: if a parameter is negative, infinite or not a number.
    """
    S, a, b = _check_params(message_bytes, alpha, beta)
    T, N = pattern.num_steps, pattern.num_ranks
    if T == 0:
        return np.zeros(0)
    fb = pattern.flow_bytes(S)
    base = pattern.step * N
    sent = np.bincount(base + pattern.src, weights=fb, minlength=T * N).reshape(T, N)
    recv = np.bincount(base + pattern.dst, weights=fb, minlength=T * N).reshape(T, N)
    used = np.bincount(pattern.step, minlength=T) > 0
    return np.where(used, a + b * np.maximum(sent, recv).max(axis=1), 0.0)


def hockney_time(pattern: CollectivePattern, message_bytes: float, alpha: float, beta: float) -> float:
    """Lock-step Hockney completion time in seconds: the sum of :func:`hockney_step_times`.

    Ring AllReduce on n ranks: ``2(n-1)(α + β·S/n)``; NCCL tree, 16 ranks: ``8α + 7βS``.
    """
    return float(hockney_step_times(pattern, message_bytes, alpha, beta).sum())


@dataclass(frozen=True)
class AlphaBetaSchedule:
    """Result of :func:`alpha_beta_schedule`.

    Attributes:
        start: first byte of every flow, seconds, shape ``(F,)``.
        last_byte: when every flow's last byte left, seconds, shape ``(F,)``.
        end: when every flow arrived (last byte + α), seconds, shape ``(F,)``.
        completion: the collective's time, ``end.max()`` (0 without flows), seconds.
        flow_bytes: bytes of every flow, shape ``(F,)``.
    """

    start: np.ndarray
    last_byte: np.ndarray
    end: np.ndarray
    completion: float
    flow_bytes: np.ndarray

    def to_trace(self, pattern: CollectivePattern, message_bytes: float, epoch: int = 0):
        """This schedule as an :class:`reactccl.trace.EpochTrace` (``meta["model"] = "alpha-beta"``)."""
        return EpochTrace(epoch, pattern, float(message_bytes), self.start, self.end, self.flow_bytes,
                          self.completion, meta={"model": "alpha-beta"})


def _external(counts, n: int, name: str) -> np.ndarray:
    """External-flow counts per rank from None, a {rank: count} mapping or a length-n sequence."""
    out = np.zeros(n, dtype=np.float64)
    if counts is None:
        return out
    if isinstance(counts, Mapping):
        for r, c in counts.items():
            if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or not 0 <= r < n:
                raise ValueError(f"{name}: rank {r!r} out of range 0..{n - 1}")
            out[int(r)] += c
    else:
        arr = np.asarray(counts, dtype=np.float64)
        if arr.shape != (n,):
            raise ValueError(f"{name}: expected {n} per-rank counts or a {{rank: count}} mapping, "
                             f"got shape {arr.shape}")
        out[:] = arr
    bad = np.flatnonzero(~np.isfinite(out) | (out < 0))
    if bad.size:
        raise ValueError(f"{name}: rank {bad[0]} has an invalid external flow count {out[bad[0]]}")
    return out


def alpha_beta_schedule(pattern: CollectivePattern, message_bytes: float, alpha: float, beta: float,
                        external_in: Mapping[int, float] | Sequence[float] | None = None,
                        external_out: Mapping[int, float] | Sequence[float] | None = None,
                        order: str = "step") -> AlphaBetaSchedule:
    """Data-driven Hockney schedule with equal sharing of each rank's injection and ejection
    link (the model in the module docstring).

    Args:
        pattern: the pattern to time.
        message_bytes: the message size S in bytes (flow f carries ``flow_fraction[f] * S``).
        alpha: latency per flow in seconds, added after the last byte.
        beta: seconds per byte of one link (1 / bandwidth in bytes/s).
        external_in, external_out: long-lived external flows into / out of ranks, as
            ``{rank: count}`` or a length-N sequence; each takes an equal share of the link.
        order: ``"step"`` (default) or ``"data"`` (:mod:`reactccl.pattern.order`).

    Returns:
        An :class:`AlphaBetaSchedule` with per-flow start/end times in seconds.

    Raises:
        ValueError: on negative or non-finite parameters, bad external counts, an unknown order.
    """
    S, a, b = _check_params(message_bytes, alpha, beta)
    check_order(order)
    p = pattern
    N, F = p.num_ranks, p.num_flows
    ext_in, ext_out = _external(external_in, N, "external_in"), _external(external_out, N, "external_out")
    fbytes = p.flow_bytes(S)
    start = np.full(F, np.nan)
    last = np.full(F, np.nan)
    if F == 0:
        return AlphaBetaSchedule(start, last, last.copy(), 0.0, fbytes)
    dep_ptr, dep_idx = p.dependencies()
    waiting = np.diff(dep_ptr)
    owner = np.repeat(np.arange(F, dtype=np.int64), waiting)
    rev_order = np.argsort(dep_idx, kind="stable")
    rev_flow = owner[rev_order]                              # dependents, grouped by the flow they wait on
    rev_ptr = np.zeros(F + 1, dtype=np.int64)
    np.cumsum(np.bincount(dep_idx, minlength=F), out=rev_ptr[1:])
    waiting = waiting.copy()
    if order == "step":
        sg = send_groups(p)
        group_left = sg.size.copy()                          # flows of each group still sending
        nxt = np.full(sg.num_groups, -1, dtype=np.int64)     # the group that waits on each group
        has_prev = sg.prev >= 0
        nxt[sg.prev[has_prev]] = np.flatnonzero(has_prev)
        waiting += has_prev[sg.group]

    remaining = fbytes.copy()
    active = np.flatnonzero(waiting == 0)
    start[active] = 0.0
    arrivals: deque[tuple[float, np.ndarray]] = deque()
    t = 0.0
    while active.size or arrivals:
        if active.size:
            share = np.maximum((np.bincount(p.src[active], minlength=N) + ext_out)[p.src[active]],
                               (np.bincount(p.dst[active], minlength=N) + ext_in)[p.dst[active]])
            to_finish = remaining[active] * (b * share)        # seconds at the current rates
            t_next = t + float(to_finish.min())
        else:
            t_next = np.inf
        if arrivals and arrivals[0][0] < t_next:
            t_next = arrivals[0][0]
        dt = t_next - t
        t = t_next
        if active.size:
            done = to_finish <= dt * (1 + 1e-9) + _ABS_TOL
            if b > 0:
                remaining[active] -= dt / (b * share)
            fin = active[done]
            remaining[fin] = 0.0
            last[fin] = t
            active = active[~done]
            if fin.size:
                arrivals.append((t + a, fin))
                if order == "step":
                    g, c = np.unique(sg.group[fin], return_counts=True)
                    group_left[g] -= c
                    after = nxt[g[group_left[g] == 0]]
                    after = after[after >= 0]
                    if after.size:
                        ready = sg.members[np.concatenate([np.arange(sg.ptr[x], sg.ptr[x + 1]) for x in after])]
                        waiting[ready] -= 1
                        ready = ready[waiting[ready] == 0]
                        start[ready] = t
                        active = np.concatenate([active, ready])
        while arrivals and arrivals[0][0] <= t + _ABS_TOL:
            _, arrived = arrivals.popleft()
            cnt = rev_ptr[arrived + 1] - rev_ptr[arrived]
            if not cnt.sum():
                continue
            offs = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            deps = rev_flow[np.repeat(rev_ptr[arrived], cnt) + offs]
            u, c = np.unique(deps, return_counts=True)
            waiting[u] -= c
            ready = u[waiting[u] == 0]
            start[ready] = t
            active = np.concatenate([active, ready])
    end = last + a
    return AlphaBetaSchedule(start, last, end, float(end.max()), fbytes)

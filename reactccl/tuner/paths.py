"""Critical paths of a weighted TEN and the analytical FCT estimator (REACT §5.4.1).

A flow may start once the flows it depends on (``CollectivePattern.dependencies``: earlier flows
into its source touching its chunks) have finished and, in step order, once its rank's sends of
the previous sending step in the same chunk graph have finished; with edge weights = FCTs the
epoch time of this model is the longest such chain, the critical path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from ..pattern import CollectivePattern
from ..pattern.order import check_order, send_groups

__all__ = ["CriticalPath", "schedule", "critical_path", "FctModel", "path_time"]


class CriticalPath:
    """A longest dependency chain: ``flows`` (indices, first to last) and its ``length`` (seconds)."""

    __slots__ = ("flows", "length")

    def __init__(self, flows: np.ndarray, length: float) -> None:
        self.flows = flows
        self.length = float(length)

    def nodes(self, pattern: CollectivePattern) -> set[tuple[int, int]]:
        """TEN vertices ``(step, rank)`` on the path: both endpoints of each flow at its step."""
        f = self.flows
        return set(zip(pattern.step[f].tolist(), pattern.src[f].tolist())) | \
            set(zip(pattern.step[f].tolist(), pattern.dst[f].tolist()))

    def __repr__(self) -> str:
        return f"CriticalPath({self.flows.tolist()}, {self.length:.6g} s)"


def schedule(pattern: CollectivePattern, weights: np.ndarray, order: str = "step") -> tuple[np.ndarray, np.ndarray]:
    """Finish times when flow ``f`` takes ``weights[f]`` seconds and starts when its data
    dependencies have finished and, in step order (``order="step"``, the executors' default,
    :mod:`reactccl.pattern.order`), when its rank's sends of the previous sending step in the
    same chunk graph have finished: ``(finish (F,), pred (F,))`` where ``pred[f]`` is the flow
    that finished last among those it waited for (-1 for none; ties go to the lowest index).
    ``order="data"``: data dependencies only.

    Raises:
        ValueError: a shape mismatch, negative/non-finite weights or an unknown order.
    """
    check_order(order)
    w = np.asarray(weights, dtype=np.float64)
    F = pattern.num_flows
    if w.shape != (F,):
        raise ValueError(f"schedule: weights of shape {w.shape}, pattern has {F} flows")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("schedule: weights must be finite and >= 0")
    if F == 0:
        return np.zeros(0), np.full(0, -1, dtype=np.int64)
    ptr, idx = pattern.dependencies()
    # one pass in step order over plain lists: a few list operations per flow and dependency
    # (numpy per step costs ~15 calls of overhead per step, 10x slower for the search's patterns)
    ptr_l, idx_l, wl = ptr.tolist(), idx.tolist(), w.tolist()
    order_l = np.argsort(pattern.step, kind="stable").tolist()
    fin = [0.0] * F
    pred_l = [-1] * F
    if order == "step":
        sg = send_groups(pattern)
        group_l, prev_l = sg.group.tolist(), sg.prev.tolist()
        gfin = [0.0] * sg.num_groups          # latest finish of each send group
        glast = [-1] * sg.num_groups          # the flow that finished it
    for f in order_l:
        st, p = 0.0, -1
        for j in range(ptr_l[f], ptr_l[f + 1]):
            d = idx_l[j]
            if p < 0 or fin[d] > st:
                st, p = fin[d], d
        if order == "step":
            g = group_l[f]
            pg = prev_l[g]
            if pg >= 0 and gfin[pg] > st:
                st, p = gfin[pg], glast[pg]
        e = st + wl[f]
        fin[f] = e
        pred_l[f] = p
        if order == "step" and (glast[g] < 0 or e > gfin[g]):
            gfin[g], glast[g] = e, f
    return np.asarray(fin), np.asarray(pred_l, dtype=np.int64)


def critical_path(pattern: CollectivePattern, weights: np.ndarray) -> CriticalPath:
    """The longest chain of dependent flows with edge weights ``weights`` (s, shape ``(F,)``),
    ending at the flow that finishes last (see :func:`schedule`)."""
    finish, pred = schedule(pattern, weights)
    if pattern.num_flows == 0:
        return CriticalPath(np.zeros(0, dtype=np.int64), 0.0)
    last = int(np.argmax(finish))
    chain = deque()
    f = last
    while f >= 0:
        chain.appendleft(f)
        f = int(pred[f])
    return CriticalPath(np.asarray(chain, dtype=np.int64), float(finish[last]))


def path_time(path: CriticalPath, weights: np.ndarray) -> float:
    """Sum of ``weights`` along the path's flows (seconds)."""
    return float(np.sum(weights[path.flows]))


class FctModel:
    """Predicts FCTs of a (transformed) pattern from observed ones (REACT §5.4.1 "estimator").

    Each observed flow gives a cost per byte and degree unit, ``c = FCT / (bytes x degree)``.
    A flow between ranks (src, dst) of a new pattern is predicted as the mean ``c`` of that pair
    over the history, times its bytes and its degree in the new pattern. A pair never observed gets
    the median ``c`` of observed flows of the same degree (or of all flows when that degree was
    never observed), but never less than the smallest ``c`` observed on any flow leaving its
    source rank or entering its destination rank: when every flow a rank sent was slow (its host
    link is congested), a new flow from it is not assumed to run at the typical speed. Without
    this floor the estimator promised gains for moving a congested sender to a partner it had
    not sent to yet (×1.4 estimated, ×1.00 measured, in the simulated sweeps often a loss). The
    paper's estimator (§5.4.1) names only the same-degree median; the floor uses nothing but
    observed FCTs.

    Args:
        num_ranks: N.
        observations: ``(pattern, fct, bytes)`` per epoch (FCT in s, bytes per flow).
    """

    def __init__(self, num_ranks: int,
                 observations: Sequence[tuple[CollectivePattern, np.ndarray, np.ndarray]]) -> None:
        if not observations:
            raise ValueError("FctModel: no observations")
        N = self.num_ranks = int(num_ranks)
        keys, cost, degs = [], [], []
        for pat, fct, nbytes in observations:
            live = nbytes > 0
            d = pat.flow_degree()[live]
            keys.append((pat.src * N + pat.dst)[live])
            cost.append(np.asarray(fct)[live] / (np.asarray(nbytes)[live] * np.maximum(d, 1)))
            degs.append(d)
        k = np.concatenate(keys)
        c = np.concatenate(cost)
        d = np.concatenate(degs)
        cnt = np.bincount(k, minlength=N * N)
        tot = np.bincount(k, weights=c, minlength=N * N)
        self.pair_seen = cnt > 0
        self.pair_cost = np.divide(tot, cnt, out=np.zeros(N * N), where=cnt > 0)
        self.global_median = float(np.median(c)) if c.size else 0.0
        kmax = int(d.max()) + 1 if d.size else 1
        self.degree_median = np.full(kmax, self.global_median)
        order = np.argsort(d, kind="stable")
        ds, cs = d[order], c[order]
        for deg in np.unique(ds):
            seg = cs[ds == deg]
            self.degree_median[deg] = float(np.median(seg))
        # smallest observed cost of any flow out of / into each rank, shape (N,) (0 when none)
        self.send_floor = np.full(N, np.inf)
        self.recv_floor = np.full(N, np.inf)
        np.minimum.at(self.send_floor, k // N, c)
        np.minimum.at(self.recv_floor, k % N, c)
        self.send_floor[np.isinf(self.send_floor)] = 0.0
        self.recv_floor[np.isinf(self.recv_floor)] = 0.0

    def predict(self, pattern: CollectivePattern, flow_bytes: np.ndarray) -> np.ndarray:
        """Predicted FCTs (s) of ``pattern``'s flows carrying ``flow_bytes`` bytes, shape ``(F,)``."""
        N = self.num_ranks
        deg = pattern.flow_degree()
        key = pattern.src * N + pattern.dst
        seen = self.pair_seen[key]
        dm = np.where(deg < len(self.degree_median),
                      self.degree_median[np.minimum(deg, len(self.degree_median) - 1)], self.global_median)
        floor = np.maximum(self.send_floor[pattern.src], self.recv_floor[pattern.dst])
        c = np.where(seen, self.pair_cost[key], np.maximum(dm, floor))
        return c * np.asarray(flow_bytes, dtype=np.float64) * np.maximum(deg, 1)

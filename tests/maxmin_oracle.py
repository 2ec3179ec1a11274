"""An independent, slow, exact check of the fluid engines: textbook progressive filling at every event.

Nothing here calls the engines' solvers (:mod:`reactccl.netsim.maxmin`, :mod:`reactccl.netsim.core`).
Only their *inputs* are shared: :func:`case_of` reads the flows, joins and sources a
:class:`~reactccl.netsim.FluidEngine` was given (before :meth:`run`), and :meth:`Case.build`
gives the same inputs to either engine through the public ``add_*`` calls.

:func:`progressive_filling` is the algorithm of Bertsekas & Gallager, *Data Networks* §6.5.2, in its
plainest form: every unfrozen flow rises at the same water level; the next level is the smallest at
which some link fills up, ``(capacity - rate of its frozen flows) / its unfrozen flows``; the flows on
the links that fill at that level freeze there. One level per round, every link and every flow looked
at every round, no incremental state. With :class:`fractions.Fraction` capacities it is exact.

:func:`simulate` is an event-driven fluid run with the engines' start rules (a flow is released at a
time or when its last input has come: an arrival of a flow in ``children``, the send end of one in
``sent_children``, or a join firing), the engines' batching (events within ``coalesce`` relative of
the earliest are handled together at the earliest time, arrivals of zero latency in the same batch)
and a from-scratch allocation of *all* active flows after every batch. It keeps no event heap for
send ends: the next one is found by scanning every active flow.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

INF = float("inf")


def progressive_filling(paths: Sequence[Sequence[int]], capacity: Sequence[Any]) -> list[Any]:
    """Max-min fair rate of each flow by textbook progressive filling.

    Args:
        paths: link ids per flow (each non-empty, a link at most once per path).
        capacity: capacity of each link (bit/s; floats, or Fractions for exact answers).

    Returns:
        One rate per flow (same number type as ``capacity``).

    Raises:
        ValueError: an empty path, a repeated link in a path, or a link of capacity <= 0.

    Example: flows A (links 0, 1), B (link 0), C (link 1), capacities ``[10, 4]``: link 1 fills
    first at level 2 (A and C freeze at 2), then link 0 at 10 - 2 = 8 for B.
    """
    n = len(paths)
    for f, p in enumerate(paths):
        if len(p) == 0:
            raise ValueError(f"flow {f}: empty path")
        if len(set(p)) != len(p):
            raise ValueError(f"flow {f}: path {list(p)} repeats a link")
        for link in p:
            if not capacity[link] > 0:
                raise ValueError(f"flow {f}: link {link} has capacity {capacity[link]!r}")
    rate: list[Any] = [None] * n
    unfrozen = set(range(n))
    level = 0 * capacity[0] if len(capacity) else 0.0
    while unfrozen:
        frozen_load: dict[int, Any] = {}
        users: dict[int, int] = {}
        for f in range(n):
            for link in paths[f]:
                if f in unfrozen:
                    users[link] = users.get(link, 0) + 1
                else:
                    frozen_load[link] = frozen_load.get(link, 0) + rate[f]
        fill = {link: (capacity[link] - frozen_load.get(link, 0)) / k for link, k in users.items()}
        nxt = min(fill.values())
        if nxt < level:  # round-off: a level never falls
            nxt = level
        level = nxt
        full = {link for link, x in fill.items() if x <= level}
        for f in sorted(unfrozen):
            if any(link in full for link in paths[f]):
                rate[f] = level
                unfrozen.discard(f)
    return rate


@dataclass
class Case:
    """The inputs of one fluid run, as the engines take them (engine-independent).

    ``bytes_`` per flow (``inf``: long-lived), ``release`` (``inf``: waits on inputs), ``children`` /
    ``sent_children`` with joins written ``~j``; ``periodic`` as ``(path, nbytes, latency, first,
    period)``; ``bursts`` as ``(flow id, source)`` for flows that count toward a source's backlog.
    """

    capacity: np.ndarray
    paths: list[tuple[int, ...]]
    bytes_: list[float]
    latency: list[float]
    waiting: list[int]
    children: list[list[int]]
    sent_children: list[list[int]]
    release: list[float]
    watched: list[bool]
    join_waiting: list[int] = field(default_factory=list)
    join_children: list[list[int]] = field(default_factory=list)
    periodic: list[tuple[tuple[int, ...], float, float, float, float]] = field(default_factory=list)
    bursts: list[tuple[int, int]] = field(default_factory=list)

    @property
    def num_flows(self) -> int:
        return len(self.paths)

    def build(self, engine_class: type, **kwargs: Any) -> Any:
        """A fresh engine of ``engine_class`` (FluidEngine or CompiledEngine) with these inputs, added
        through the public calls, flow by flow in id order (watched and unwatched blocks keep their
        ids)."""
        eng = engine_class(self.capacity, **kwargs)
        if self.join_waiting:
            eng.add_joins(self.join_waiting, self.join_children)
        for per in self.periodic:
            path, nbytes, lat, first, period = per
            eng.add_periodic(list(path), nbytes, lat, first, period)
        burst_of = dict(self.bursts)
        f = 0
        while f < self.num_flows:
            if f in burst_of:
                got = eng.add_burst(burst_of[f], list(self.paths[f]), self.bytes_[f], self.latency[f])
                assert got == f
                f += 1
                continue
            g = f
            while g < self.num_flows and self.watched[g] == self.watched[f] and g not in burst_of:
                g += 1
            got = eng.add_flows(self.paths[f:g], self.bytes_[f:g], self.latency[f:g], self.waiting[f:g],
                                self.children[f:g], self.release[f:g], self.watched[f],
                                sent_children=self.sent_children[f:g])
            assert got == f
            f = g
        return eng


def case_of(eng: Any) -> Case:
    """The inputs a :class:`~reactccl.netsim.FluidEngine` holds before its :meth:`run` (its
    ``add_*`` calls so far), as a :class:`Case`."""
    F = len(eng.paths)
    release = [INF] * F
    firsts = {}
    for t, kind, i, _ in eng.heap:
        if kind == 2:        # a release
            release[i] = t
        elif kind == 3:      # a periodic source's first emission
            firsts[i] = t
    periodic = [(p[0], p[1], p[2], firsts[i], p[3]) for i, p in enumerate(eng.periodic)]
    return Case(
        capacity=np.array(eng.cap, dtype=np.float64), paths=[tuple(p) for p in eng.paths],
        bytes_=[r / 8.0 for r in eng.rem], latency=list(eng.latency), waiting=list(eng.waiting),
        children=[list(c) for c in eng.children], sent_children=[list(c) for c in eng.sent_children],
        release=release, watched=[bool(w) for w in eng.watched], join_waiting=list(eng.join_waiting),
        join_children=[list(c) for c in eng.join_children], periodic=periodic,
        bursts=sorted(eng.origin.items()))


@dataclass
class OracleRun:
    """What :func:`simulate` returns: per-flow ``start``, ``send_end``, ``end`` (s, ``nan`` if not
    reached; emitted periodic flows appended after the case's flows), ``events`` handled, ``batches``
    and the finish time ``time``."""

    start: list[float]
    send_end: list[float]
    end: list[float]
    events: int
    batches: int
    time: float


def simulate(case: Case, coalesce: float = 1e-12, max_batches: int = 2_000_000,
             on_batch: Callable[[float, list[int], list[float]], None] | None = None) -> OracleRun:
    """Run ``case`` until every watched flow has arrived, re-solving every active flow's rate by
    :func:`progressive_filling` after every batch of events.

    ``on_batch(t, active, rates)`` is called after each batch's allocation (flow ids and their rates).

    Raises:
        RuntimeError: nothing left to happen while watched flows are pending, or more than
            ``max_batches`` batches.
    """
    cap = [float(c) for c in case.capacity]
    paths = list(case.paths)
    bits = [b * 8.0 for b in case.bytes_]           # bits left, as of time tl[f]
    lat = list(case.latency)
    waiting = list(case.waiting)
    jwait = list(case.join_waiting)
    watched = list(case.watched)
    F = len(paths)
    nan = float("nan")
    start, send_end, end = [nan] * F, [nan] * F, [nan] * F
    rate = [0.0] * F
    tl = [0.0] * F
    active: list[int] = []
    arrivals: list[tuple[float, int]] = []            # (time, flow)
    releases = [(case.release[f], f) for f in range(F) if waiting[f] == 0 and case.release[f] != INF]
    next_emit = [p[3] for p in case.periodic]
    pending = sum(watched)
    events = batches = 0
    t = 0.0

    def feed(kids: Sequence[int], started: list[int]) -> None:
        """One input reaches each of ``kids`` (breadth first): a flow with none left starts, a join
        with none left passes one input on to each of its own children."""
        todo = deque(kids)
        while todo:
            c = todo.popleft()
            if c < 0:
                jwait[~c] -= 1
                todo.extend(case.join_children[~c] if jwait[~c] == 0 else ())
                continue
            waiting[c] -= 1
            if waiting[c] == 0:
                started.append(c)

    while pending > 0:
        if batches >= max_batches:
            raise RuntimeError(f"oracle: more than {max_batches} batches at t={t}")
        done_at = {f: tl[f] + bits[f] / rate[f] for f in active if bits[f] != INF}
        cands = list(done_at.values()) + [a for a, _ in arrivals] + [r for r, _ in releases] + next_emit
        if not cands:
            raise RuntimeError(f"oracle: {pending} watched flows can never finish")
        t = min(cands)
        limit = t + abs(t) * coalesce
        batches += 1
        started: list[int] = []
        for f, x in done_at.items():                   # send ends: last byte out
            if x <= limit:
                events += 1
                active.remove(f)
                bits[f], rate[f], send_end[f] = 0.0, 0.0, t
                arrivals.append((t + lat[f], f))
                feed(case.sent_children[f] if f < len(case.sent_children) else [], started)
        for r, f in [x for x in releases if x[0] <= limit]:
            events += 1
            releases.remove((r, f))
            started.append(f)
        for _, i in sorted((x, i) for i, x in enumerate(next_emit) if x <= limit):  # the engines' order
            path, nbytes, plat, _, period = case.periodic[i]
            events += 1
            fid = len(paths)
            paths.append(tuple(path))
            bits.append(nbytes * 8.0)
            lat.append(plat)
            rate.append(0.0)
            tl.append(t)
            watched.append(False)
            start.append(nan)
            send_end.append(nan)
            end.append(nan)
            started.append(fid)
            next_emit[i] = t + period
        while any(a <= limit for a, _ in arrivals):    # arrivals, and zero-latency ones they cause
            now = [x for x in arrivals if x[0] <= limit]
            arrivals = [x for x in arrivals if x[0] > limit]
            for _, f in now:
                events += 1
                end[f] = t
                if watched[f]:
                    pending -= 1
                if f < len(case.children):
                    feed(case.children[f], started)
        for f in active:                                # bring every active flow to time t
            if bits[f] != INF:
                bits[f] = max(bits[f] - rate[f] * (t - tl[f]), 0.0)
            tl[f] = t
        for f in started:
            start[f] = t
            tl[f] = t
            active.append(f)
        active.sort()
        rates = progressive_filling([paths[f] for f in active], cap)
        for f, r in zip(active, rates, strict=True):
            rate[f] = r
        if on_batch is not None:
            on_batch(t, list(active), list(rates))
    return OracleRun(start, send_end, end, events, batches, t)


def worst_rate_error(paths: Sequence[Sequence[int]], capacity: Sequence[float], rates: Sequence[float]) -> float:
    """Largest relative difference between ``rates`` and the progressive-filling rates of ``paths``."""
    if not paths:
        return 0.0
    want = np.array(progressive_filling(paths, [float(c) for c in capacity]))
    got = np.asarray(rates, dtype=np.float64)
    return float(np.max(np.abs(got - want) / want))

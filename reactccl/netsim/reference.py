"""The event-driven fluid core: flows start, share links max-min fairly, finish, and arrive.

A flow is a path (link ids), a byte count (``inf`` for a long-lived flow) and a
path latency. It is *released* at a time or when its last dependency is met:
an arrival of a flow it waits on, or the *send end* (last byte out) of a flow
it follows in step order, directly or through zero-cost *joins* that stand for
many of them at once (see :mod:`.joins`); it then sends at its max-min fair rate until its last byte is out
(``send_end``) and its data arrives ``latency`` seconds later (``end``). So an
uncontended flow takes ``latency + bytes * 8 / min capacity``.

Events at equal times (within 1e-12 relative of the earliest live event: a finish
entry superseded by a rate change is no event) are handled as one batch, after
which rates are recomputed only in the connected component(s) of the
flow-link graph that the batch touched: other flows keep their rates and their
pending finish events. A flow alone on its links gets its path's smallest
capacity without any water-filling; larger components use the vectorised
:func:`~reactccl.netsim.maxmin.max_min_rates`. Per-flow state lives in Python
lists (scalar access is several times faster than numpy item access).

Guards: a run can never go on without end or grow memory without bound. It
stops with :class:`SimulationError` once it has handled more than
``max_events`` events (default ``MAX_EVENTS_BASE + MAX_EVENTS_PER_FLOW`` per flow
added before the run: 20 million plus 100 per flow, far above the ~3 events per
flow a run needs), or once one periodic source has more than ``max_backlog``
bursts (default :data:`MAX_BACKLOG` = 1000) still sending at once -- its offered
rate exceeds the rate the network gives it, so its backlog would only grow.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import chain

import numpy as np

from ..errors import ReactcclError
from .maxmin import max_min_rates

__all__ = ["FluidEngine", "SimulationError", "MAX_EVENTS_BASE", "MAX_EVENTS_PER_FLOW", "MAX_BACKLOG", "COALESCE"]

MAX_EVENTS_BASE = 20_000_000
MAX_EVENTS_PER_FLOW = 100
MAX_BACKLOG = 1000

_SEND_DONE, _ARRIVE, _RELEASE, _PERIODIC = 0, 1, 2, 3
COALESCE = 1e-12
_RATE_TOL = 1e-12


class SimulationError(ReactcclError, RuntimeError):
    """The simulation cannot finish (e.g. a flow waits on a dependency that never arrives), or it hit
    a guard (too many events, a periodic source whose backlog keeps growing)."""


class FluidEngine:
    """One run of the fluid network from time 0 until every *watched* flow has arrived.

    Args:
        capacity: link capacities in bit/s, shape ``(L,)``.
        max_events: stop with :class:`SimulationError` after this many events (``None``:
            ``MAX_EVENTS_BASE + MAX_EVENTS_PER_FLOW x`` flows added before :meth:`run`).
        max_backlog: most bursts of one periodic source (or carried over from an earlier
            epoch via :meth:`add_burst`) that may be sending at once.

    Raises:
        ValueError: ``max_events`` or ``max_backlog`` not an integer >= 1.

    Use :meth:`add_flows` (and :meth:`add_periodic` for on/off sources), then :meth:`run`.
    After the run, ``start``, ``send_end`` and ``end`` hold per-flow times (``nan`` if
    not reached) and :meth:`unfinished` lists flows still sending with their bytes left.
    """

    def __init__(self, capacity: np.ndarray, max_events: int | None = None, max_backlog: int = MAX_BACKLOG,
                 coalesce: float = COALESCE) -> None:
        if not (isinstance(coalesce, (int, float, np.floating)) and 0.0 <= float(coalesce) < 1e-2):
            raise ValueError(f"FluidEngine: coalesce must be a relative time tolerance in [0, 0.01), got {coalesce!r}")
        self.coalesce = float(coalesce)
        for name, v in (("max_events", max_events), ("max_backlog", max_backlog)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
                raise ValueError(f"FluidEngine: {name} must be an integer >= 1, got {v!r}")
        self.max_events = None if max_events is None else int(max_events)
        self.max_backlog = int(max_backlog)
        self.cap = np.asarray(capacity, dtype=np.float64)
        self._init_flows()
        self.periodic: list[tuple[tuple[int, ...], float, float, float]] = []
        self.next_periodic: list[float] = []
        self.origin: dict[int, int] = {}  # flow id -> periodic source that emitted it
        self.inflight: list[int] = []  # per periodic source: its bursts still sending
        self.heap: list[tuple[float, int, int, int]] = []
        self.pending = 0  # watched flows not yet arrived
        self.time = 0.0
        self.events = 0
        self.batches = 0

    def _init_flows(self) -> None:
        """The per-flow and per-join state (Python lists; the compiled engine keeps arrays instead)."""
        self.cap_list = self.cap.tolist()
        self.link_flows: list[set[int]] = [set() for _ in range(len(self.cap))]
        self.paths: list[tuple[int, ...]] = []
        self.pathcap: list[float] = []
        self.latency: list[float] = []
        self.rem: list[float] = []
        self.rate: list[float] = []
        self.tlast: list[float] = []
        self.version: list[int] = []
        self.waiting: list[int] = []
        self.children: list[Sequence[int]] = []  # flow ids, and joins j as ~j
        self.sent_children: list[Sequence[int]] = []  # fed when the flow's last byte leaves
        self.join_waiting: list[int] = []
        self.join_children: list[Sequence[int]] = []
        self.watched: list[bool] = []
        self.start: list[float] = []
        self.send_end: list[float] = []
        self.end: list[float] = []

    @property
    def num_flows(self) -> int:
        """Flows added so far (ids ``0 .. num_flows - 1``)."""
        return len(self.paths)

    @property
    def num_joins(self) -> int:
        """Joins added so far."""
        return len(self.join_waiting)

    # ------------------------------------------------------------------ input
    def add_flows(self, paths: Sequence[Sequence[int]], nbytes: Sequence[float], latency: Sequence[float],
                  waiting: Sequence[int], children: Sequence[Sequence[int]], release: Sequence[float],
                  watched: bool, sent_children: Sequence[Sequence[int]] | None = None) -> int:
        """Add flows; returns the id of the first (ids are consecutive).

        Args:
            paths: link ids per flow (non-empty).
            nbytes: bytes per flow (``inf``: never finishes).
            latency: path latency per flow in seconds.
            waiting: number of dependencies per flow; a flow with 0 starts at ``release``.
            children: per flow, what its arrival feeds: ids (global, i.e. already offset)
                of the flows that depend on it, and joins ``j`` written ``~j`` (see
                :meth:`add_joins`).
            release: start time of flows with no dependencies (``inf``: only via deps).
            watched: the run ends once all watched flows have arrived.
            sent_children: per flow, what its *send end* (last byte out, before the path
                latency) feeds, in the same encoding as ``children`` (step order,
                :mod:`reactccl.pattern.order`); ``None``: nothing.

        Raises:
            SimulationError: an empty path.
        """
        first = len(self.paths)
        tuples = [p if type(p) is tuple else tuple(p) for p in paths]
        if not all(tuples):
            k = next(k for k, p in enumerate(tuples) if not p)
            raise SimulationError(f"flow {first + k}: empty path (source and destination on one host)")
        n = len(tuples)
        self.paths.extend(tuples)
        caps = self.cap_list
        self.pathcap.extend(min(caps[l] for l in p) if len(p) > 1 else caps[p[0]] for p in tuples)
        self.latency.extend(np.asarray(latency, dtype=np.float64).tolist())
        self.rem.extend((np.asarray(nbytes, dtype=np.float64) * 8.0).tolist())  # bits left
        self.rate.extend([0.0] * n)
        self.tlast.extend([0.0] * n)
        self.version.extend([0] * n)
        self.waiting.extend(np.asarray(waiting, dtype=np.int64).tolist())
        self.children.extend(children)
        self.sent_children.extend(sent_children if sent_children is not None else [()] * n)
        self.watched.extend([watched] * n)
        nan = float("nan")
        self.start.extend([nan] * n)
        self.send_end.extend([nan] * n)
        self.end.extend([nan] * n)
        if watched:
            self.pending += n
        for k in range(n):
            if self.waiting[first + k] == 0 and release[k] != float("inf"):
                heapq.heappush(self.heap, (float(release[k]), _RELEASE, first + k, 0))
        return first

    def add_joins(self, waiting: Sequence[int], children: Sequence[Sequence[int]]) -> int:
        """Add joins: zero-cost barriers that fire, at the instant of their last input's
        arrival, once ``waiting[j]`` inputs (flow arrivals, or other joins firing) have come;
        firing feeds ``children[j]`` (flow ids, or joins written ``~j``) like an arrival
        does. They let a flow wait on many flows through few edges
        (:mod:`reactccl.netsim.joins`). Returns the id of the first (ids are consecutive).

        Raises:
            SimulationError: a join that waits on nothing (it could never fire).
        """
        first = len(self.join_waiting)
        w = np.asarray(waiting, dtype=np.int64).tolist()
        if len(w) != len(children):
            raise SimulationError(f"add_joins: {len(w)} waiting counts for {len(children)} child lists")
        if w and min(w) < 1:
            raise SimulationError(f"join {first + w.index(min(w))}: waits on {min(w)} inputs, needs >= 1")
        self.join_waiting.extend(w)
        self.join_children.extend(children)
        return first

    def add_periodic(self, path: Sequence[int], nbytes: float, latency: float, first: float,
                     period: float) -> None:
        """A source that starts a new flow of ``nbytes`` every ``period`` seconds from time ``first``."""
        if len(path) == 0:
            raise SimulationError("periodic flow: empty path")
        if not (float(nbytes) > 0 and float(period) > 0):
            raise SimulationError(f"periodic flow: nbytes and period must be > 0, got {nbytes!r}, {period!r}")
        idx = len(self.periodic)
        self.periodic.append((tuple(path), float(nbytes), float(latency), float(period)))
        self.next_periodic.append(float(first))
        self.inflight.append(0)
        heapq.heappush(self.heap, (float(first), _PERIODIC, idx, 0))

    def add_burst(self, source: int, path: Sequence[int], nbytes: float, latency: float) -> int:
        """A burst of periodic source ``source`` left over from an earlier epoch: starts at time 0 with
        ``nbytes`` left and counts toward that source's backlog. Returns its flow id.

        Raises:
            SimulationError: unknown source or the source's backlog is over ``max_backlog``.
        """
        if not 0 <= source < len(self.periodic):
            raise SimulationError(f"burst: no periodic source {source} (have {len(self.periodic)})")
        fid = self.add_flows([path], [nbytes], [latency], [0], [()], [0.0], False)
        self._count_burst(source, fid)
        return fid

    def _count_burst(self, source: int, fid: int) -> None:
        self.origin[fid] = source
        self.inflight[source] += 1
        if self.inflight[source] > self.max_backlog:
            path, nbytes, _, period = self.periodic[source]
            raise SimulationError(
                f"periodic source {source} (links {list(path)}): backlog grew to {self.inflight[source]} bursts "
                f"still sending at t={self.time:.6g} s (max_backlog={self.max_backlog}); it offers "
                f"{nbytes * 8 / period / 1e9:.4g} Gbps but gets less, so its backlog never drains")

    # -------------------------------------------------------------------- run
    def run(self) -> float:
        """Advance until every watched flow has arrived; returns that time (s).

        Raises:
            SimulationError: events run out while watched flows are still pending; more than
                ``max_events`` events; a periodic source over ``max_backlog`` bursts in flight.
        """
        heap = self.heap
        pop = heapq.heappop
        max_events = self.max_events
        if max_events is None:
            max_events = self.events + MAX_EVENTS_BASE + MAX_EVENTS_PER_FLOW * len(self.paths)
        while self.pending > 0:
            if self.events > max_events:
                raise SimulationError(
                    f"event count grew past max_events={max_events} at t={self.time:.6g} s with {self.pending} "
                    f"watched flows pending and {len(self.paths)} flows in all (periodic sources emitted "
                    f"{len(self.origin)}); the run would not end in reasonable time")
            while heap and heap[0][1] == _SEND_DONE and heap[0][3] != self.version[heap[0][2]]:
                pop(heap)  # superseded finish entries: a batch starts at the earliest live event
            if not heap:
                waiting = [i for i, w in enumerate(self.watched) if w and self.end[i] != self.end[i]]
                raise SimulationError(f"{len(waiting)} flows can never finish (first: flow {waiting[0]}); "
                                      "a dependency cycle or a flow with no rate")
            t = heap[0][0]
            limit = t + abs(t) * self.coalesce
            started: list[int] = []
            stopped: list[int] = []
            self.batches += 1
            while heap and heap[0][0] <= limit:
                _, kind, i, ver = pop(heap)
                if kind == _SEND_DONE and ver != self.version[i]:
                    continue  # superseded by a rate change: not an event
                self.events += 1
                if kind == _SEND_DONE:
                    stopped.append(i)
                    src = self.origin.get(i)
                    if src is not None:
                        self.inflight[src] -= 1
                    self.send_end[i] = t
                    self.rem[i] = 0.0
                    heapq.heappush(heap, (t + self.latency[i], _ARRIVE, i, 0))
                    kids = self.sent_children[i]
                    if kids:
                        self._feed(kids, started)
                elif kind == _ARRIVE:
                    self.end[i] = t
                    if self.watched[i]:
                        self.pending -= 1
                    kids = self.children[i]
                    if kids:
                        self._feed(kids, started)
                elif kind == _RELEASE:
                    started.append(i)
                else:  # periodic source i emits a flow
                    path, nbytes, lat, period = self.periodic[i]
                    fid = self.add_flows([path], [nbytes], [lat], [1], [()], [float("inf")], False)
                    self.time = t
                    self._count_burst(i, fid)
                    started.append(fid)
                    self.next_periodic[i] = t + period
                    heapq.heappush(heap, (t + period, _PERIODIC, i, 0))
            self.time = t
            self._reschedule(t, started, stopped)
        return self.time

    def _feed(self, kids: Sequence[int], started: list[int]) -> None:
        """One input arrives at each of ``kids``: flows whose last input it was start now,
        joins whose last input it was fire now and feed their own children."""
        waiting, jwait, jkids = self.waiting, self.join_waiting, self.join_children
        stack = list(kids)
        while stack:
            c = stack.pop()
            if c >= 0:
                waiting[c] -= 1
                if waiting[c] == 0:
                    started.append(c)
            else:
                j = ~c
                jwait[j] -= 1
                if jwait[j] == 0:
                    stack.extend(jkids[j])

    def _reschedule(self, t: float, started: list[int], stopped: list[int]) -> None:
        link_flows, paths = self.link_flows, self.paths
        seeds: set[int] = set()
        for i in stopped:
            p = paths[i]
            for l in p:
                link_flows[l].discard(i)
            seeds.update(p)
            self.rate[i] = 0.0
        for i in started:
            p = paths[i]
            for l in p:
                link_flows[l].add(i)
            seeds.update(p)
            self.start[i] = t
            self.tlast[i] = t
        if not seeds:
            return
        # connected component(s) of the flow-link graph touched by this batch
        comp: set[int] = set()
        frontier, seen = seeds, set(seeds)
        while frontier:
            new = set().union(*(link_flows[l] for l in frontier)) - comp
            if not new:
                break
            comp |= new
            frontier = set(chain.from_iterable(paths[f] for f in new)) - seen
            seen |= frontier
        if not comp:
            return
        if len(comp) == 1:
            flows = list(comp)
            rates = [self.pathcap[flows[0]]]
        else:
            flows = sorted(comp)
            lens = [len(paths[f]) for f in flows]
            pl = np.fromiter(chain.from_iterable(paths[f] for f in flows), dtype=np.int64, count=sum(lens))
            pf = np.repeat(np.arange(len(flows)), lens)
            rates = max_min_rates(pf, pl, self.cap, len(flows)).tolist()
        fresh = set(started)
        rem, rate, tlast, version = self.rem, self.rate, self.tlast, self.version
        push = heapq.heappush
        for f, r in zip(flows, rates):
            old = rate[f]
            if f not in fresh and abs(r - old) <= _RATE_TOL * old:
                continue  # unchanged: its finish event stays valid
            left = rem[f] - old * (t - tlast[f])
            left = left if left > 0.0 else 0.0
            rem[f], rate[f], tlast[f] = left, r, t
            version[f] += 1
            if left != float("inf"):
                push(self.heap, (t + left / r, _SEND_DONE, f, version[f]))

    # ----------------------------------------------------------------- output
    def unfinished(self) -> list[tuple[int, float]]:
        """Flows still sending at :attr:`time`, with the bytes each has left."""
        t = self.time
        out = []
        for i, p in enumerate(self.paths):
            if self.start[i] == self.start[i] and self.send_end[i] != self.send_end[i]:
                out.append((i, max(self.rem[i] - self.rate[i] * (t - self.tlast[i]), 0.0) / 8.0))
        return out

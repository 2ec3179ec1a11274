""":class:`CompiledEngine`: the fluid engine with its event loop and max-min re-solve compiled.

Same inputs, same outputs and the same model as the pure-Python
:class:`~reactccl.netsim.reference.FluidEngine`, which stays the reference (a test runs both on
random dependency graphs with background and bulk flows and compares every flow's times to
1e-9 relative). The loop itself is :func:`reactccl.netsim.core.run_loop` (numba, cached on disk
after the first compile), set up by :func:`reactccl.netsim.prepare.prepare` (both in one call,
:func:`reactccl.netsim.core.run_table`) from a
:class:`~reactccl.netsim.plan.FlowTable`: the blocks the ``add_*`` methods collected, or a ready
table from :meth:`CompiledEngine.use_table` (what :class:`~reactccl.netsim.network.SimulatedNetwork`
passes: its :class:`~reactccl.netsim.plan.EpochPlan` for the epoch's jobs, built once).

Events handled at one instant: every event within ``1e-12`` relative of the earliest pending
one is handled as one batch at that earliest time (both engines). That moves a flow's end by
at most 1e-12 of the current time per event on its dependency chain, far below the 1e-9 the
tests ask for; ``events`` counts handled events only. A rate change moves the flow's finish
entry in the heap (an indexed heap), so no superseded entries are left to pop; the reference
drops superseded entries before it takes the earliest time, so in both a batch starts at the
earliest live event.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import core
from .reference import MAX_EVENTS_BASE, MAX_EVENTS_PER_FLOW, FluidEngine, SimulationError
from .plan import FlowTable

__all__ = ["CompiledEngine"]

_NO_PERIODIC = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0),
                np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))


def _csr(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    flat = np.fromiter((c for x in lists for c in x), dtype=np.int64, count=int(ptr[-1]))
    return ptr, flat


class CompiledEngine(FluidEngine):
    """:class:`~reactccl.netsim.reference.FluidEngine` with a compiled :meth:`run` (same arguments,
    attributes and errors). Flows and joins are kept as :class:`~reactccl.netsim.plan.FlowTable`
    blocks; :meth:`add_flow_arrays` and :meth:`add_join_arrays` take CSR arrays directly, and
    :meth:`use_table` a whole ready table (an :class:`~reactccl.netsim.plan.EpochPlan`'s). ``start``,
    ``send_end`` and ``end`` are numpy arrays after the run, and ``path_links``/``path_start``/
    ``path_len`` each flow's path in it."""

    def _init_flows(self) -> None:
        self._blocks: list[tuple[FlowTable, np.ndarray | None]] = []
        self._nflows = 0
        self._njoins = 0

    @property
    def num_flows(self) -> int:
        """Flows added so far (ids ``0 .. num_flows - 1``)."""
        return self._nflows

    @property
    def num_joins(self) -> int:
        """Joins added so far."""
        return self._njoins

    def add_flows(self, paths, nbytes, latency, waiting, children, release, watched, sent_children=None) -> int:
        """As :meth:`FluidEngine.add_flows` (Python lists per flow)."""
        tuples = [tuple(p) for p in paths]
        if not all(tuples):
            k = next(k for k, p in enumerate(tuples) if not p)
            raise SimulationError(f"flow {self._nflows + k}: empty path (source and destination on one host)")
        ptr, links = _csr(tuples)
        cptr, child = _csr(children)
        sptr, sent = _csr(sent_children if sent_children is not None else [()] * len(tuples))
        return self.add_flow_arrays(ptr, links, nbytes, latency, waiting, cptr, child, sptr, sent, release, watched)

    def add_flow_arrays(self, ptr, links, nbytes, latency, waiting, child_ptr, child, sent_ptr, sent, release,
                        watched: bool) -> int:
        """Add F flows from arrays: paths as CSR ``ptr (F+1,)`` / ``links``; ``nbytes``, ``latency``,
        ``waiting``, ``release`` shape ``(F,)``; arrival children and send-end children as CSR
        (flow ids already offset, joins ``~j``). Returns the id of the first flow.

        Raises:
            SimulationError: an empty path.
        """
        ptr = np.asarray(ptr, dtype=np.int64)
        F = len(ptr) - 1
        lens = np.diff(ptr)
        if F and lens.min() < 1:
            raise SimulationError(f"flow {self._nflows + int(np.argmin(lens))}: empty path "
                                  "(source and destination on one host)")
        table = FlowTable.of_paths(ptr, links, latency, np.asarray(nbytes, dtype=np.float64) * 8.0, waiting,
                                   np.full(F, int(bool(watched))), release, (child_ptr, child), (sent_ptr, sent))
        return self._add(table, None)

    def add_joins(self, waiting, children) -> int:
        """As :meth:`FluidEngine.add_joins`."""
        if len(waiting) != len(children):
            raise SimulationError(f"add_joins: {len(waiting)} waiting counts for {len(children)} child lists")
        ptr, child = _csr(children)
        return self.add_join_arrays(waiting, ptr, child)

    def add_join_arrays(self, waiting, child_ptr, child) -> int:
        """Add joins from arrays (``waiting (J,)``, children as CSR). Returns the first join's id.

        Raises:
            SimulationError: a join that waits on nothing.
        """
        w = np.asarray(waiting, dtype=np.int64)
        if w.size and w.min() < 1:
            raise SimulationError(f"join {self._njoins + int(np.argmin(w))}: waits on {int(w.min())} inputs, "
                                  "needs >= 1")
        first = self._njoins
        e = np.zeros(0)
        self._add(FlowTable.of_paths(np.zeros(1, np.int64), [], e, e, e, e, e, joins=(w, child_ptr, child)), None)
        return first

    def use_table(self, table: FlowTable, rows: np.ndarray) -> int:
        """Add a ready table (its ids already global: flows from :attr:`num_flows`, joins from
        :attr:`num_joins`), each flow taking its row ``rows[f]`` (shape ``(F,)``, ``0 .. K-1``).
        Returns the id of the first flow."""
        if len(rows) != table.num_flows:
            raise SimulationError(f"use_table: {len(rows)} rows for {table.num_flows} flows")
        return self._add(table, np.asarray(rows, dtype=np.int64))

    def _add(self, table: FlowTable, rows: np.ndarray | None) -> int:
        first = self._nflows
        self._blocks.append((table, rows))
        self._nflows += table.num_flows
        self._njoins += len(table.jwait)
        self.pending += int(np.count_nonzero(table.watched))
        return first

    def _table(self) -> tuple[FlowTable, np.ndarray]:
        """All blocks as one table, and each flow's row."""
        if not self._blocks:
            e = np.zeros(0)
            return FlowTable.of_paths(np.zeros(1, np.int64), [], e, e, e, e, e), np.zeros(0, np.int64)
        rows = [r if r is not None else np.zeros(t.num_flows, np.int64) for t, r in self._blocks]
        if len(self._blocks) == 1:
            return self._blocks[0][0], rows[0]
        return FlowTable.concat([t for t, _ in self._blocks]), np.concatenate(rows)

    def run(self) -> float:
        """Advance until every watched flow has arrived; returns that time (s).

        Raises:
            SimulationError: as :meth:`FluidEngine.run`.
        """
        t, rows = self._table()
        F = t.num_flows
        self.watched = t.watched
        max_events = self.max_events
        if max_events is None:
            max_events = self.events + MAX_EVENTS_BASE + MAX_EVENTS_PER_FLOW * F
        P = len(self.periodic)
        if P:
            per_ptr, per_links = _csr([p[0] for p in self.periodic])
            per = np.array([(q[1] * 8.0, q[2], q[3]) for q in self.periodic])
            h = np.array([(e[0], e[1], e[2]) for e in self.heap]).reshape(-1, 3)
            per_bits, per_lat, per_period = per[:, 0].copy(), per[:, 1].copy(), per[:, 2].copy()
            ht0, hk0, hi0 = h[:, 0].copy(), h[:, 1].astype(np.int64), h[:, 2].astype(np.int64)
        else:                 # self.heap only ever holds periodic entries; the kernel reads these only
            per_ptr, per_links, per_bits, per_lat, per_period, ht0, hk0, hi0 = _NO_PERIODIC
        origin = np.full(F, -1, dtype=np.int64)
        for fid, src in self.origin.items():
            origin[fid] = src
        next_periodic = np.asarray(self.next_periodic, dtype=np.float64) if P else per_bits
        inflight = np.asarray(self.inflight, dtype=np.int64) if P else per_links
        si = np.zeros(core.NUM_SI, dtype=np.int64)
        si[core.S_EVENTS], si[core.S_BATCHES], si[core.S_PENDING] = self.events, self.batches, self.pending
        si[core.S_MAXEV], si[core.S_MAXBL] = max_events, self.max_backlog
        sf = np.array([float(self.time), self.coalesce])
        status, plinks, FF, FI = core.run_table(
            self.cap, t.tlen, t.tstart, t.tlinks, t.tlat, rows, t.waiting, t.release, self.max_backlog + 1,
            t.child_ptr, t.child, t.sent_ptr, t.sent, t.jwait.copy(), t.jptr, t.jkids,
            per_ptr, per_links, per_bits, per_lat, per_period, next_periodic, inflight,
            t.bits, t.watched, origin, ht0, hk0, hi0, sf, si)
        self._unpack(FF, FI, plinks, si, sf, next_periodic, inflight)
        self._si = si
        if status == 1:
            waiting = [i for i, w in enumerate(self.watched) if w and self.end[i] != self.end[i]]
            raise SimulationError(f"{len(waiting)} flows can never finish (first: flow {waiting[0]}); "
                                  "a dependency cycle or a flow with no rate")
        if status == 2:
            raise SimulationError(
                f"event count grew past max_events={max_events} at t={self.time:.6g} s with {self.pending} "
                f"watched flows pending and {self._nflows} flows in all (periodic sources emitted "
                f"{len(self.origin)}); the run would not end in reasonable time")
        if status == 3:
            src = int(si[core.S_ARG])
            path, nbytes, _, period = self.periodic[src]
            raise SimulationError(
                f"periodic source {src} (links {list(path)}): backlog grew to {self.inflight[src]} bursts "
                f"still sending at t={self.time:.6g} s (max_backlog={self.max_backlog}); it offers "
                f"{nbytes * 8 / period / 1e9:.4g} Gbps but gets less, so its backlog never drains")
        return self.time

    @property
    def stats(self) -> dict[str, int]:
        """The kernel's counters of the last run: solves, flows solved, flows whose rate a solve
        changed (``changed``: what the exact per-flow model must update; how tight the re-solved set
        is), largest heap, water-filling rounds, passes (solve + check) and full-component fallbacks."""
        si = self._si
        return {"solves": int(si[core.S_SOLVES]), "solved_flows": int(si[core.S_SOLVED]),
                "changed": int(si[core.S_CHANGED]),
                "heap_max": int(si[core.S_HMAX]), "rounds": int(si[core.S_ROUNDS]),
                "passes": int(si[core.S_PASSES]), "full": int(si[core.S_FULL])}

    def _unpack(self, FF, FI, plinks, si, sf, next_periodic, inflight) -> None:
        """Copy the kernel's state back into the attributes :class:`FluidEngine` has."""
        F0, n = self._nflows, int(si[core.S_NFLOWS])
        for f in range(F0, n):                      # flows the periodic sources emitted
            self.origin[f] = int(FI[f, core.ORIGIN])
        if n > F0:
            self.watched = np.concatenate([self.watched, np.zeros(n - F0, dtype=np.int64)])
        self._nflows = n
        self.path_start, self.path_len = FI[:n, core.PSTART], FI[:n, core.PLEN]
        self.path_links = plinks[:int(si[core.S_NPL])]
        # views: FF is this run's own
        self.rem, self.rate, self.tlast = FF[:n, core.REM], FF[:n, core.RATE], FF[:n, core.TLAST]
        self.start, self.send_end, self.end = FF[:n, core.START], FF[:n, core.SEND_END], FF[:n, core.END]
        self.time = float(sf[0])
        self.events, self.batches = int(si[core.S_EVENTS]), int(si[core.S_BATCHES])
        self.pending = int(si[core.S_PENDING])
        self.next_periodic = next_periodic.tolist()
        self.inflight = inflight.tolist()
        self.heap = []                               # the run is over; a second run() is not supported

    def unfinished(self) -> list[tuple[int, float]]:
        """Flows still sending at :attr:`time`, with the bytes each has left."""
        t = self.time
        sending = np.flatnonzero(~np.isnan(self.start) & np.isnan(self.send_end))
        left = np.maximum(self.rem[sending] - self.rate[sending] * (t - self.tlast[sending]), 0.0) / 8.0
        return list(zip(sending.tolist(), left.tolist()))


""":class:`CompiledEngine`: the fluid engine with its event loop and max-min re-solve compiled.

Same inputs, same outputs and the same model as the pure-Python
:class:`~reactccl.netsim.engine.FluidEngine`, which stays the reference (a test runs both on
random dependency graphs with background and bulk flows and compares every flow's times to
1e-9 relative). The loop itself is :func:`reactccl.netsim.core.run_loop` (numba, cached on disk
after the first compile). Inputs are collected in Python lists by the ``add_*`` methods and
turned into flat arrays once, when :meth:`run` is called.

Events handled at one instant: every event within ``1e-12`` relative of the earliest pending
one is handled as one batch at that earliest time (both engines). That moves a flow's end by
at most 1e-12 of the current time per event on its dependency chain, far below the 1e-9 the
tests ask for; ``events`` counts handled events only (a finish event superseded by a rate
change is skipped and not counted).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import core
from .engine import MAX_EVENTS_BASE, MAX_EVENTS_PER_FLOW, FluidEngine, SimulationError

__all__ = ["CompiledEngine"]


def _csr(lists: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    flat = np.fromiter((c for x in lists for c in x), dtype=np.int64, count=int(ptr[-1]))
    return ptr, flat


class CompiledEngine(FluidEngine):
    """:class:`~reactccl.netsim.engine.FluidEngine` with a compiled :meth:`run` (same arguments,
    attributes and errors). Flows and joins are kept as array blocks; :meth:`add_flow_arrays`
    and :meth:`add_join_arrays` take CSR arrays directly (what the executors use, no Python
    lists per flow). ``start``, ``send_end`` and ``end`` are numpy arrays after the run."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._flow_blocks: list[tuple] = []
        self._join_blocks: list[tuple] = []
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
        first = self._nflows
        self._flow_blocks.append((ptr, np.asarray(links, dtype=np.int64), np.asarray(nbytes, dtype=np.float64) * 8.0,
                                  np.asarray(latency, dtype=np.float64), np.asarray(waiting, dtype=np.int64),
                                  np.asarray(child_ptr, dtype=np.int64), np.asarray(child, dtype=np.int64),
                                  np.asarray(sent_ptr, dtype=np.int64), np.asarray(sent, dtype=np.int64),
                                  np.asarray(release, dtype=np.float64), bool(watched)))
        self._nflows += F
        if watched:
            self.pending += F
        return first

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
        self._join_blocks.append((w, np.asarray(child_ptr, dtype=np.int64), np.asarray(child, dtype=np.int64)))
        self._njoins += len(w)
        return first

    def _flows(self):
        """All flow blocks joined: paths, per-flow arrays and the two child CSRs."""
        blocks = self._flow_blocks
        F = self._nflows

        def cat_csr(pi, ci):
            ptrs, flat, base = [np.zeros(1, dtype=np.int64)], [], 0
            for b in blocks:
                ptrs.append(b[pi][1:] - b[pi][0] + base)
                flat.append(b[ci][b[pi][0]:b[pi][-1]])
                base += int(b[pi][-1] - b[pi][0])
            return np.concatenate(ptrs), (np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64))

        def cat(i, dtype):
            return np.concatenate([b[i] for b in blocks]).astype(dtype) if blocks else np.zeros(0, dtype)

        pptr, plinks = cat_csr(0, 1)
        cptr, child = cat_csr(5, 6)
        sptr, sent = cat_csr(7, 8)
        watched = np.concatenate([np.full(len(b[0]) - 1, b[10]) for b in blocks]) if blocks else np.zeros(0, bool)
        return (F, pptr, plinks, cat(2, np.float64), cat(3, np.float64), cat(4, np.int64), cptr, child, sptr, sent,
                cat(9, np.float64), watched)

    def run(self) -> float:
        """Advance until every watched flow has arrived; returns that time (s).

        Raises:
            SimulationError: as :meth:`FluidEngine.run`.
        """
        L, P = len(self.cap), len(self.periodic)
        F, pptr, plinks, bits, lat, waiting, child_ptr, child, sent_ptr, sent, release, watched = self._flows()
        self.watched = watched.tolist()
        max_events = self.max_events
        if max_events is None:
            max_events = self.events + MAX_EVENTS_BASE + MAX_EVENTS_PER_FLOW * F
        plen = np.diff(pptr)
        per_ptr, per_links = _csr([p[0] for p in self.periodic])
        # slots per link: every flow that ever crosses it, plus a full backlog per periodic source
        lcapn = np.bincount(plinks, minlength=L) + np.bincount(per_links, minlength=L) * (self.max_backlog + 1)
        lstart = np.zeros(L, dtype=np.int64)
        np.cumsum(lcapn[:-1], out=lstart[1:])
        FC = max(F + 64 * P, 1)
        FF = np.zeros((FC, core.NF_COLS))
        FI = np.zeros((FC, core.NI_COLS), dtype=np.int64)
        FF[:F, core.REM] = bits
        FF[:F, core.LAT] = lat
        FF[:F, core.START:core.END + 1] = np.nan
        caps = self.cap[plinks] if F else np.zeros(0)
        FF[:F, core.PATHCAP] = np.minimum.reduceat(caps, pptr[:-1]) if F else 0.0
        FI[:F, core.PSTART] = pptr[:-1]
        FI[:F, core.PLEN] = plen
        FI[:F, core.WAITING] = waiting
        FI[:F, core.WATCHED] = watched
        FI[:, core.ORIGIN] = -1
        for fid, src in self.origin.items():
            FI[fid, core.ORIGIN] = src
        rel = np.flatnonzero((waiting == 0) & (release != np.inf))
        heap = [(float(t), 2, int(i), 0) for t, i in zip(release[rel].tolist(), rel.tolist())] + self.heap
        if heap:
            ht, hk, hi, hv = (np.array(c) for c in zip(*heap))
            ht, hk, hi, hv = ht.astype(np.float64), hk.astype(np.int64), hi.astype(np.int64), hv.astype(np.int64)
            order = np.lexsort((hv, hi, hk, ht))      # a sorted array is a valid heap
            ht, hk, hi, hv = ht[order], hk[order], hi[order], hv[order]
        else:
            ht, hk, hi, hv = np.zeros(1), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)
        hsize = len(heap)
        jb = self._join_blocks
        jwait = np.concatenate([b[0] for b in jb]) if jb else np.zeros(0, dtype=np.int64)
        jptr = np.concatenate([np.zeros(1, np.int64)] + [b[1][1:] - b[1][0] + o for b, o in zip(
            jb, np.cumsum([0] + [int(b[1][-1] - b[1][0]) for b in jb])[:-1])]) if jb else np.zeros(1, np.int64)
        jkids = np.concatenate([b[2][b[1][0]:b[1][-1]] for b in jb]) if jb else np.zeros(0, dtype=np.int64)
        per = np.array([(q[1] * 8.0, q[2], q[3]) for q in self.periodic]).reshape(-1, 3)
        next_periodic = np.asarray(self.next_periodic, dtype=np.float64)
        inflight = np.asarray(self.inflight, dtype=np.int64)
        sf = np.array([self.time, self.coalesce])
        si = np.zeros(core.NUM_SI, dtype=np.int64)
        si[core.S_NFLOWS], si[core.S_NPL], si[core.S_HSIZE] = F, len(plinks), hsize
        si[core.S_EVENTS], si[core.S_BATCHES], si[core.S_PENDING] = self.events, self.batches, self.pending
        si[core.S_MAXEV], si[core.S_MAXBL], si[core.S_NSTATIC] = max_events, self.max_backlog, F
        lbuf = np.zeros(max(int(lcapn.sum()), 1), dtype=np.int64)
        status, plinks, ppos, FF, FI, ht, hk, hi, hv = core.run_loop(
            self.cap, child_ptr, child, sent_ptr, sent, jwait, jptr, jkids,
            per_ptr, per_links, per[:, 0].copy(), per[:, 1].copy(), per[:, 2].copy(), next_periodic, inflight,
            lbuf, lstart, np.zeros(L, dtype=np.int64), plinks, np.zeros(len(plinks), dtype=np.int64), FF, FI,
            ht, hk, hi, hv, sf, si)
        self._unpack(FF, FI, plinks, si, sf, next_periodic, inflight)
        self.stats = {"solves": int(si[core.S_SOLVES]), "solved_flows": int(si[core.S_SOLVED]),
                      "heap_max": int(si[core.S_HMAX]), "rounds": int(si[core.S_ROUNDS]),
                      "passes": int(si[core.S_PASSES]), "full": int(si[core.S_FULL])}
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

    def _unpack(self, FF, FI, plinks, si, sf, next_periodic, inflight) -> None:
        """Copy the kernel's state back into the attributes :class:`FluidEngine` has."""
        F0, n = self._nflows, int(si[core.S_NFLOWS])
        for f in range(F0, n):                      # flows the periodic sources emitted
            self.origin[f] = int(FI[f, core.ORIGIN])
        self.watched.extend([False] * (n - F0))
        self._nflows = n
        self.rem, self.rate, self.tlast = (FF[:n, c].copy() for c in (core.REM, core.RATE, core.TLAST))
        self.start, self.send_end, self.end = (FF[:n, c].copy() for c in (core.START, core.SEND_END, core.END))
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


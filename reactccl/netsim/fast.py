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
    attributes and errors). ``start``, ``send_end`` and ``end`` are numpy arrays after the run."""

    def run(self) -> float:
        """Advance until every watched flow has arrived; returns that time (s).

        Raises:
            SimulationError: as :meth:`FluidEngine.run`.
        """
        F, L, P = len(self.paths), len(self.cap), len(self.periodic)
        max_events = self.max_events
        if max_events is None:
            max_events = self.events + MAX_EVENTS_BASE + MAX_EVENTS_PER_FLOW * F
        plen = np.fromiter((len(p) for p in self.paths), dtype=np.int64, count=F)
        pstart = np.concatenate([[0], np.cumsum(plen)[:-1]]).astype(np.int64) if F else plen.copy()
        plinks = np.fromiter((l for p in self.paths for l in p), dtype=np.int64, count=int(plen.sum()))
        per_ptr, per_links = _csr([p[0] for p in self.periodic])
        # slots per link: every flow that ever crosses it, plus a full backlog per periodic source
        lcapn = np.bincount(plinks, minlength=L) + np.bincount(per_links, minlength=L) * (self.max_backlog + 1)
        lstart = np.concatenate([[0], np.cumsum(lcapn)[:-1]]).astype(np.int64)
        FC = max(F + 64 * P, 1)
        FF = np.zeros((FC, core.NF_COLS))
        FI = np.zeros((FC, core.NI_COLS), dtype=np.int64)
        FF[:F, core.REM] = self.rem
        FF[:F, core.RATE] = self.rate
        FF[:F, core.TLAST] = self.tlast
        FF[:F, core.LAT] = self.latency
        FF[:F, core.START] = self.start
        FF[:F, core.SEND_END] = self.send_end
        FF[:F, core.END] = self.end
        FF[:F, core.PATHCAP] = self.pathcap
        FI[:F, core.PSTART] = pstart
        FI[:F, core.PLEN] = plen
        FI[:F, core.WAITING] = self.waiting
        FI[:F, core.VERSION] = self.version
        FI[:F, core.WATCHED] = self.watched
        FI[:, core.ORIGIN] = -1
        for fid, src in self.origin.items():
            FI[fid, core.ORIGIN] = src
        if self.heap:
            ht, hk, hi, hv = (np.array(c) for c in zip(*self.heap))
            ht, hk, hi, hv = ht.astype(np.float64), hk.astype(np.int64), hi.astype(np.int64), hv.astype(np.int64)
            order = np.lexsort((hv, hi, hk, ht))      # a sorted array is a valid heap
            ht, hk, hi, hv = ht[order], hk[order], hi[order], hv[order]
        else:
            ht, hk, hi, hv = np.zeros(1), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)
        hsize = len(self.heap)
        child_ptr, child = _csr(self.children)
        sent_ptr, sent = _csr(self.sent_children)
        jptr, jkids = _csr(self.join_children)
        jwait = np.asarray(self.join_waiting, dtype=np.int64)
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
                      "heap_max": int(si[core.S_HMAX]), "rounds": int(si[core.S_ROUNDS])}
        if status == 1:
            waiting = [i for i, w in enumerate(self.watched) if w and self.end[i] != self.end[i]]
            raise SimulationError(f"{len(waiting)} flows can never finish (first: flow {waiting[0]}); "
                                  "a dependency cycle or a flow with no rate")
        if status == 2:
            raise SimulationError(
                f"event count grew past max_events={max_events} at t={self.time:.6g} s with {self.pending} "
                f"watched flows pending and {len(self.paths)} flows in all (periodic sources emitted "
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
        F0, n = len(self.paths), int(si[core.S_NFLOWS])
        for f in range(F0, n):                      # flows the periodic sources emitted
            a, k = int(FI[f, core.PSTART]), int(FI[f, core.PLEN])
            self.paths.append(tuple(plinks[a:a + k].tolist()))
            self.origin[f] = int(FI[f, core.ORIGIN])
        self.watched.extend([False] * (n - F0))
        self.rem, self.rate, self.tlast = (FF[:n, c].copy() for c in (core.REM, core.RATE, core.TLAST))
        self.start, self.send_end, self.end = (FF[:n, c].copy() for c in (core.START, core.SEND_END, core.END))
        self.time = float(sf[0])
        self.events, self.batches, self.pending = int(si[core.S_EVENTS]), int(si[core.S_BATCHES]), int(si[core.S_PENDING])
        self.next_periodic = next_periodic.tolist()
        self.inflight = inflight.tolist()
        self.heap = []                               # the run is over; a second run() is not supported

    def unfinished(self) -> list[tuple[int, float]]:
        """Flows still sending at :attr:`time`, with the bytes each has left."""
        t = self.time
        sending = np.flatnonzero(~np.isnan(self.start) & np.isnan(self.send_end))
        left = np.maximum(self.rem[sending] - self.rate[sending] * (t - self.tlast[sending]), 0.0) / 8.0
        return list(zip(sending.tolist(), left.tolist()))


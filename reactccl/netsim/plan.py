"""What the compiled engine is given per run, and what stays the same from one epoch to the next.

A :class:`FlowTable` is every flow of a run as flat arrays: its path for each of K ECMP ports,
bits, start conditions (waiting counts, arrival and send-end children, joins), release time and
whether the run waits for it. :class:`CompiledEngine` builds a K = 1 table from what was added
with ``add_*``. An :class:`EpochPlan` builds, once, the table of a set of jobs plus the network's
long-lived background flows, for every port (paths from :class:`~reactccl.netsim.jobdata.JobData`,
joins from :mod:`.joins`); an epoch then only draws one port per flow (the ``rows`` of the table)
and runs. :class:`SimulatedNetwork` keeps plans by the identity of their jobs' data (pattern,
placement, size, job index), the resolved background and the header scale, so a changed pattern,
placement or background gets a new plan.

:class:`PathList` is an epoch's paths (one array of link ids per flow) without one array object
per flow until one is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["FlowTable", "EpochPlan", "PathList"]

_I = np.int64


def _cat_csr(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """CSR pieces ``(ptr, flat)`` (each ptr starting anywhere) joined into one."""
    ptrs, flat, base = [np.zeros(1, _I)], [], 0
    for ptr, x in parts:
        ptrs.append(ptr[1:] - ptr[0] + base)
        flat.append(x[ptr[0]:ptr[-1]])
        base += int(ptr[-1] - ptr[0])
    return np.concatenate(ptrs), (np.concatenate(flat).astype(_I) if flat else np.zeros(0, _I))


@dataclass(frozen=True)
class FlowTable:
    """F flows and J joins as the compiled engine reads them (child references as in
    :mod:`.joins`: flow ids ``>= 0``, join ``j`` as ``~j``, both already global).

    Attributes:
        tlen, tstart: shape ``(K, F)``: path length and offset into ``tlinks`` per port row.
        tlinks: link ids of all rows' paths. tlat: path latency (s), shape ``(K, F)``.
        bits: bits to send, shape ``(F,)`` (``inf``: never ends). waiting: start conditions per flow.
        watched: 1 if the run waits for the flow's arrival. release: start time of a flow that
            waits on nothing (``inf``: none).
        child_ptr/child, sent_ptr/sent: CSR of what a flow's arrival / last byte out feeds.
        jwait, jptr/jkids: each join's inputs and CSR of what it releases.
    """

    tlen: np.ndarray
    tstart: np.ndarray
    tlinks: np.ndarray
    tlat: np.ndarray
    bits: np.ndarray
    waiting: np.ndarray
    watched: np.ndarray
    release: np.ndarray
    child_ptr: np.ndarray
    child: np.ndarray
    sent_ptr: np.ndarray
    sent: np.ndarray
    jwait: np.ndarray
    jptr: np.ndarray
    jkids: np.ndarray

    @property
    def num_flows(self) -> int:
        """Flows F."""
        return self.bits.shape[0]

    @property
    def num_rows(self) -> int:
        """Port rows K."""
        return self.tlen.shape[0]

    @classmethod
    def concat(cls, tables: Sequence[FlowTable]) -> FlowTable:
        """One table of ``tables`` in order (ids inside them already global); a table with fewer
        rows repeats its last row."""
        K = max(t.num_rows for t in tables)

        def rows(a: np.ndarray) -> np.ndarray:
            return a if a.shape[0] == K else np.concatenate([a, np.repeat(a[-1:], K - a.shape[0], axis=0)])

        base = np.cumsum([0] + [len(t.tlinks) for t in tables])[:-1]
        child = _cat_csr([(t.child_ptr, t.child) for t in tables])
        sent = _cat_csr([(t.sent_ptr, t.sent) for t in tables])
        jk = _cat_csr([(t.jptr, t.jkids) for t in tables])
        return cls(np.concatenate([rows(t.tlen) for t in tables], axis=1),
                   np.concatenate([rows(t.tstart) + b for t, b in zip(tables, base)], axis=1),
                   np.concatenate([t.tlinks for t in tables]), np.concatenate([rows(t.tlat) for t in tables], axis=1),
                   *(np.concatenate([getattr(t, n) for t in tables]) for n in ("bits", "waiting", "watched",
                                                                                "release")),
                   child[0], child[1], sent[0], sent[1], np.concatenate([t.jwait for t in tables]), jk[0], jk[1])

    @classmethod
    def of_paths(cls, ptr, links, latency, bits, waiting, watched, release, child=None, sent=None,
                 joins=None) -> FlowTable:
        """A one-row table: paths as CSR ``ptr (F+1,)``/``links``, per-flow arrays ``(F,)``;
        ``child``/``sent`` CSR pairs and ``joins`` ``(jwait, jptr, jkids)`` (default: none)."""
        ptr = np.asarray(ptr, _I)
        F = len(ptr) - 1
        none = (np.zeros(F + 1, _I), np.zeros(0, _I))
        child, sent = child or none, sent or none
        jw, jp, jk = joins if joins is not None else (np.zeros(0, _I), np.zeros(1, _I), np.zeros(0, _I))
        return cls(np.diff(ptr)[None, :], (ptr[:-1] - ptr[0])[None, :], np.asarray(links, _I)[ptr[0]:ptr[-1]],
                   np.asarray(latency, np.float64)[None, :], np.asarray(bits, np.float64),
                   np.asarray(waiting, _I), np.asarray(watched, _I), np.asarray(release, np.float64),
                   np.asarray(child[0], _I), np.asarray(child[1], _I), np.asarray(sent[0], _I),
                   np.asarray(sent[1], _I), np.asarray(jw, _I), np.asarray(jp, _I), np.asarray(jk, _I))


class EpochPlan:
    """The table of one epoch's jobs (``jobs``: their :class:`~reactccl.netsim.jobdata.JobData`,
    in job order, at least one) and long-lived background flows (``background``: ``(ptr, links,
    latency)`` CSR); flows in that order, joins job by job, one table row per ECMP port.

    ``header_scale`` multiplies the jobs' bytes (``1 / header_efficiency``). Holds its jobs'
    data, so the identities it is cached by stay valid.
    """

    def __init__(self, jobs: Sequence, background: tuple[np.ndarray, np.ndarray, np.ndarray],
                 header_scale: float) -> None:
        self.jobs = list(jobs)
        parts, offset, joff = [], 0, 0
        for jd in self.jobs:
            g, F = jd.graph, len(jd.nbytes)

            def shift(ref, offset=offset, joff=joff):
                return np.where(ref >= 0, ref + offset, ref - joff)

            ln, st, lk, lat = jd.table()
            parts.append(FlowTable(ln, st, lk, lat, (jd.nbytes * header_scale) * 8.0, g.flow_waiting,
                                   np.ones(F, _I), np.zeros(F), g.flow_child_ptr, shift(g.flow_child),
                                   g.flow_sent_ptr, shift(g.flow_sent), g.join_waiting, g.join_child_ptr,
                                   shift(g.join_child)))
            offset, joff = offset + F, joff + g.num_joins
        ptr, links, lat = background
        k = len(ptr) - 1
        if k:
            parts.append(FlowTable.of_paths(ptr, links, lat, np.full(k, np.inf), np.zeros(k, _I), np.zeros(k, _I),
                                            np.zeros(k)))
        self.offsets = np.cumsum([0] + [len(jd.nbytes) for jd in self.jobs])
        self.num_background = k
        self._rows = np.zeros(int(self.offsets[-1]) + k, _I)   # background flows: row 0
        self.table = FlowTable.concat(parts)
        self.num_joins = int(sum(jd.graph.num_joins for jd in self.jobs))

    def rows(self, ports: Sequence[np.ndarray]) -> np.ndarray:
        """Each flow's table row for the jobs' drawn ``ports`` (each ``0 .. K-1`` or more; a table
        with fewer rows has fixed routes; background flows: row 0)."""
        if self.table.num_rows == 1:
            return np.zeros(len(self._rows), _I)
        if len(ports) == 1 and not self.num_background:
            return np.asarray(ports[0], _I)
        rows = self._rows.copy()
        for p, a in zip(ports, self.offsets[:-1].tolist()):
            rows[a:a + len(p)] = p
        return rows


class PathList(Sequence):
    """Flow ``i``'s path is ``links[ptr[i]:ptr[i + 1]]`` (link ids); ``len`` is the flow count."""

    def __init__(self, links: np.ndarray, ptr: np.ndarray) -> None:
        self.links, self.ptr = links, ptr

    def __len__(self) -> int:
        return len(self.ptr) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"PathList: flow {i} out of range for {n} flows")
        i = i % n
        return self.links[self.ptr[i]:self.ptr[i + 1]]

    def __iter__(self):
        p = self.ptr.tolist()
        links = self.links
        return (links[a:b] for a, b in zip(p[:-1], p[1:]))

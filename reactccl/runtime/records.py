"""Per-rank timing records of real collectives, and their assembly into :class:`EpochTrace`.

A rank knows when it started each flow it sends (the moment it handed the
staged data to the transport), when it entered the call (it posts its receives
then) and when each flow it receives became available (the moment the receive
completed). Neither side alone knows a flow's completion time, so every rank keeps a :class:`LocalRecord` per call and
one place (a test, the RTuner leader) joins the records of all ranks with
:func:`assemble_trace`. Times are ``time.monotonic()`` seconds (CLOCK_MONOTONIC,
shared by all processes of one machine, network namespaces included); ranks
on different machines need synchronised clocks, or ``clock_offset`` (seconds to
add to this rank's times to get the reference clock).

Source: REACT §6.1 ("timing events before and after each peer-to-peer
operation") and §6.2 (FCTs gathered at the leader).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..pattern import CollectivePattern
from ..trace import EpochTrace

__all__ = ["LocalRecord", "assemble_trace", "merge_traces", "record_to_wire", "record_from_wire"]


@dataclass
class LocalRecord:
    """One rank's view of one call of a collective.

    Attributes:
        rank: the rank that recorded it.
        epoch: epoch number the call belongs to.
        enter, exit: when the call's data movement began (after the agreement check and
            planning) and when the call returned (seconds, monotonic clock).
        sent: flow ids this rank sent, shape ``(s,)``; ``sent_start`` their
            start times, ``sent_bytes`` their sizes in bytes.
        recv: flow ids this rank received, shape ``(r,)``; ``recv_end`` the
            times their data was available here.
        message_bytes: the buffer the rank ran on, in bytes (the whole message; for AllToAll
            the N x N matrix buffer, N times nccl-tests' size).
        digest: the pattern's digest (see ``RCollective``), to check that all
            records of one call ran the same pattern.
    """

    rank: int
    epoch: int
    enter: float
    exit: float
    sent: np.ndarray
    sent_start: np.ndarray
    sent_bytes: np.ndarray
    recv: np.ndarray
    recv_end: np.ndarray
    message_bytes: int
    digest: int = 0
    clock_offset: float = 0.0


def assemble_trace(pattern: CollectivePattern, records: list[LocalRecord]) -> EpochTrace:
    """Join the records of all ranks of one call into an :class:`EpochTrace`.

    Times in the trace are seconds from the earliest ``enter`` of any rank (kept as ``meta["t0"]``,
    seconds on rank 0's monotonic clock, so calls can be laid on one timeline). A
    flow's end comes from its receiver. Its start is the later of its sender's post
    and its receiver's ``enter``: both executors of the Gloo path post every receive
    on entry, and a flow cannot move before its receiver is there, so a receiver that
    reaches the call late (rank skew: in DDP, a rank whose backward pass ran slower)
    is not read as a slow link. Where receives are posted per step (``run_stepwise``)
    the receiver's ``enter`` is a lower bound of its post. A flow that carried no data
    (all its chunks empty) gets start = end = its sender's ``enter``. ``duration`` is
    the latest ``exit`` minus the earliest ``enter``.

    Raises:
        ValueError: records of different epochs or digests, a rank missing or
            repeated, or a flow that no record started or ended although it
            carried data.
    """
    p = pattern
    N, F = p.num_ranks, p.num_flows
    ranks = sorted(r.rank for r in records)
    if ranks != list(range(N)):
        raise ValueError(f"assemble_trace: need one record from each of ranks 0..{N - 1}, got ranks {ranks}")
    epochs = {r.epoch for r in records}
    digests = {r.digest for r in records}
    for r in records:
        for name, ids in (("sent", r.sent), ("recv", r.recv)):
            if ids.size and (ids.min() < 0 or ids.max() >= F):
                raise ValueError(f"assemble_trace: rank {r.rank}'s record names {name} flow "
                                 f"{int(ids.max() if ids.max() >= F else ids.min())}, but the pattern has {F} flows")
    if len(epochs) != 1 or len(digests) != 1:
        raise ValueError(f"assemble_trace: records disagree on epoch {sorted(epochs)} or pattern digest "
                         f"{sorted(digests)}")
    off = {r.rank: r.clock_offset for r in records}
    t0 = min(r.enter + r.clock_offset for r in records)
    enter = np.array([r.enter + r.clock_offset for r in sorted(records, key=lambda r: r.rank)]) - t0
    start = enter[p.src].copy()
    end = np.full(F, np.nan)
    nbytes = np.zeros(F)
    for r in records:
        if r.sent.size:
            start[r.sent] = r.sent_start + off[r.rank] - t0
            nbytes[r.sent] = r.sent_bytes
        if r.recv.size:
            end[r.recv] = r.recv_end + off[r.rank] - t0
    empty = nbytes == 0
    start = np.where(empty, start, np.maximum(start, enter[p.dst]))
    end[empty & np.isnan(end)] = start[empty & np.isnan(end)]
    if np.isnan(end).any():
        f = int(np.flatnonzero(np.isnan(end))[0])
        raise ValueError(f"assemble_trace: flow {f} ({p.src[f]}->{p.dst[f]}, step {p.step[f]}) was sent but "
                         f"no receive time was recorded")
    end = np.maximum(end, start)
    duration = max(r.exit + r.clock_offset for r in records) - t0
    rec = records[0]
    # a record holds the buffer a rank ran on: for AllToAll the N x N matrix, N x nccl-tests' size
    size = float(rec.message_bytes) / p.collective.message_scale(p.num_ranks)
    return EpochTrace(rec.epoch, p, size, start, end, nbytes, float(duration),
                      meta={"executor": "rcollective", "enter": enter, "t0": float(t0)})


def merge_traces(traces: list[EpochTrace]) -> EpochTrace:
    """Several calls of one pattern in one epoch (e.g. the gradient buckets of one
    training step) as one trace.

    Bytes and FCTs add up per flow: flow ``f`` starts where it started in the
    first call and ends after the sum of its FCTs, so its throughput is total
    bytes over total time. ``duration`` and ``message_bytes`` add up too.

    Raises:
        ValueError: empty list, or traces of different patterns.
    """
    if not traces:
        raise ValueError("merge_traces: no traces")
    if len(traces) == 1:
        return traces[0]
    p = traces[0].pattern
    if any(t.pattern is not p and t.pattern != p for t in traces[1:]):
        raise ValueError("merge_traces: the traces ran different patterns")
    fct = np.sum([t.fct for t in traces], axis=0)
    start = traces[0].start
    return EpochTrace(traces[0].epoch, p, float(sum(t.message_bytes for t in traces)), start, start + fct,
                      np.sum([t.flow_bytes for t in traces], axis=0), float(sum(t.duration for t in traces)),
                      meta={"executor": "rcollective", "calls": len(traces)})


_WIRE_FIELDS = ("rank", "epoch", "enter", "exit", "sent", "sent_start", "sent_bytes", "recv", "recv_end",
                "message_bytes", "digest", "clock_offset")


def record_to_wire(rec: LocalRecord) -> dict:
    """``rec`` as plain JSON data (ints, floats, lists): what the control plane sends instead
    of a pickled object. Floats survive exactly (JSON keeps Python's shortest repr)."""
    return {"rank": int(rec.rank), "epoch": int(rec.epoch), "enter": float(rec.enter), "exit": float(rec.exit),
            "sent": np.asarray(rec.sent, dtype=np.int64).tolist(),
            "sent_start": np.asarray(rec.sent_start, dtype=np.float64).tolist(),
            "sent_bytes": np.asarray(rec.sent_bytes, dtype=np.int64).tolist(),
            "recv": np.asarray(rec.recv, dtype=np.int64).tolist(),
            "recv_end": np.asarray(rec.recv_end, dtype=np.float64).tolist(),
            "message_bytes": int(rec.message_bytes), "digest": int(rec.digest),
            "clock_offset": float(rec.clock_offset)}


def _ints(v, name: str) -> np.ndarray:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2 ** 62
                                          for x in v):
        raise ValueError(f"record field {name!r}: expected a list of integers in [0, 2^62)")
    return np.array(v, dtype=np.int64)


def _floats(v, name: str) -> np.ndarray:
    if not isinstance(v, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        raise ValueError(f"record field {name!r}: expected a list of numbers")
    a = np.array(v, dtype=np.float64)
    if not np.isfinite(a).all():
        raise ValueError(f"record field {name!r}: not every time is finite")
    return a


def _number(v, name: str, integer: bool = False):
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if not ok or isinstance(v, bool) or (not integer and not np.isfinite(v)):
        raise ValueError(f"record field {name!r}: expected {'an integer' if integer else 'a finite number'}, "
                         f"got {type(v).__name__}")
    return int(v) if integer else float(v)


def record_from_wire(d) -> LocalRecord:
    """The :class:`LocalRecord` in ``d`` (from :func:`record_to_wire`), checked field by field:
    the data came over the network, so nothing in it is trusted or executed.

    Raises:
        ValueError: not a dict of exactly the record's fields, a wrong type or a non-finite
            time (naming the field), or id and time lists of different lengths.
    """
    if not isinstance(d, dict) or set(d) != set(_WIRE_FIELDS):
        got = sorted(d) if isinstance(d, dict) else type(d).__name__
        raise ValueError(f"record: expected the fields {list(_WIRE_FIELDS)}, got {got}")
    sent, recv = _ints(d["sent"], "sent"), _ints(d["recv"], "recv")
    rec = LocalRecord(_number(d["rank"], "rank", True), _number(d["epoch"], "epoch", True),
                      _number(d["enter"], "enter"), _number(d["exit"], "exit"), sent,
                      _floats(d["sent_start"], "sent_start"), _ints(d["sent_bytes"], "sent_bytes"), recv,
                      _floats(d["recv_end"], "recv_end"), _number(d["message_bytes"], "message_bytes", True),
                      _number(d["digest"], "digest", True), _number(d["clock_offset"], "clock_offset"))
    if not (len(rec.sent) == len(rec.sent_start) == len(rec.sent_bytes)) or len(rec.recv) != len(rec.recv_end):
        raise ValueError(f"record of rank {rec.rank}: flow ids and their times/sizes differ in length")
    return rec

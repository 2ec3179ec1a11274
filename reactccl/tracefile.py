"""Flow timelines as Chrome trace-event JSON, the format Perfetto (ui.perfetto.dev) and
chrome://tracing open, from :class:`~reactccl.trace.EpochTrace` s and REACT's decision log.

Layout of a file (one or more *runs*, e.g. the baseline and REACT arms of ``simulate --react``):

- a process per rank and run (``"REACT: rank 3"``; where the run is alone, ``"rank 3"``), its
  threads *lanes*: a flow is one complete event (``ph: "X"``) on its sender's process, in the
  first lane free at its start, so slices of one lane never overlap (a rank's concurrent sends
  stack in lanes ``flows 1``, ``flows 2``, ...). ``args`` hold flow, epoch, step, src, dst, chunk
  graph, op, bytes, FCT (µs) and rate (Gbps), and the hosts where the executor knows them;
- a process per run named ``"... epochs"``: an ``X`` event per epoch (algbw, busbw in GB/s) on lanes
  ``epochs 1``, ... (real calls of several ranks can overlap: one rank enters the next call before
  another leaves this one), and on thread ``REACT`` an instant event (``ph: "i"``) per decision at
  the end of the epoch it was made after, and one where it takes effect (``applied``), only if that
  epoch ran;
- metadata events (``ph: "M"``) naming every process and thread and ordering them.

``ts``/``dur`` are microseconds (floats, to the nanosecond). The grouping of flows into processes
is one function (:func:`by_rank`; ``tracks=`` takes another, e.g. per NIC once a topology has
servers), so a per-NIC track is one more grouping. :func:`check_trace_events` checks a document
against the fields and types above. Source: the Trace Event Format document (Google, "Trace Event
Format", the JSON Perfetto's legacy importer reads); ours otherwise.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .trace import EpochTrace

__all__ = ["TraceRun", "by_rank", "chrome_trace", "write_chrome_trace", "check_trace_events", "MAX_EVENTS"]

#: Most events one file may hold (about 300 bytes each: 600 MB); more is refused before writing.
MAX_EVENTS = 2_000_000

_US = 1e6
_REACT_TID = 1000     # the decisions' thread in a run's epochs process (lanes are 1, 2, ...)

#: ``tracks(trace) -> (key per flow (F,), {key: process name})``: which process each flow goes on.
Tracks = Callable[[EpochTrace], tuple[np.ndarray, dict[int, str]]]


def by_rank(trace: EpochTrace) -> tuple[np.ndarray, dict[int, str]]:
    """The default grouping: each flow on its sender's rank (``"rank 3"``)."""
    src = np.asarray(trace.pattern.src, dtype=np.int64)
    return src, {int(r): f"rank {int(r)}" for r in range(trace.pattern.num_ranks)}


@dataclass
class TraceRun:
    """One timeline: the epochs of one job under one controller.

    Attributes:
        name: shown before every process name (``"REACT"``, ``"baseline"``); ``""`` for none.
        traces: the epochs, in order (:class:`~reactccl.trace.EpochTrace`; flow times are seconds
            from each epoch's start).
        starts: each epoch's start on the run's clock (s), shape ``(E,)``; None: back to back from 0,
            as the simulator's clock runs (epoch e starts when e - 1 ends).
        decisions: REACT's decisions (objects with ``epoch``, ``effective_epoch``, ``kind`` and
            ``to_dict()``, e.g. :class:`reactccl.tuner.log.Decision`), or their ``to_dict()`` forms.
        unit: what one trace is called on the epochs track (``"epoch"``; ``perf``: ``"call"``).
    """

    name: str
    traces: Sequence[EpochTrace]
    starts: Sequence[float] | None = None
    decisions: Sequence[Any] = field(default_factory=list)
    unit: str = "epoch"

    @classmethod
    def on_clock(cls, name: str, traces: Sequence[EpochTrace], decisions: Sequence[Any] = (),
                 unit: str = "epoch") -> TraceRun:
        """A run of real calls laid out as they ran: each trace starts at its ``meta["t0"]`` (s, the
        runtime's clock, :func:`reactccl.runtime.records.assemble_trace`), less the first one's.

        Raises:
            KeyError: a trace without ``meta["t0"]`` (not from the runtime).
        """
        t0 = [float(t.meta["t0"]) for t in traces]
        first = min(t0, default=0.0)
        return cls(name, traces, [t - first for t in t0], list(decisions), unit)

    def epoch_starts(self) -> np.ndarray:
        """``starts`` as an array, or the back-to-back starts (s), shape ``(E,)``.

        Raises:
            ValueError: ``starts`` of another length than ``traces``, or not finite.
        """
        if self.starts is None:
            d = np.array([t.duration for t in self.traces], dtype=np.float64)
            return np.concatenate([[0.0], np.cumsum(d)[:-1]]) if len(d) else d
        s = np.asarray(self.starts, dtype=np.float64)
        if s.shape != (len(self.traces),) or not np.all(np.isfinite(s)):
            raise ValueError(f"TraceRun {self.name!r}: starts must be {len(self.traces)} finite times, got "
                             f"shape {s.shape}")
        return s


def _us(seconds: float) -> float:
    return round(float(seconds) * _US, 3)


def _label(run: TraceRun, what: str) -> str:
    return f"{run.name}: {what}" if run.name else what


def _decision_fields(d: Any) -> dict[str, Any]:
    doc = d if isinstance(d, Mapping) else d.to_dict()
    keep = ("epoch", "effective_epoch", "kind", "swaps", "tried", "estimated_gain", "estimated_epoch_gain",
            "measured_gain", "reverted", "reverts")
    return {k: doc[k] for k in keep if k in doc}


def _decision_name(i: int, doc: Mapping[str, Any]) -> str:
    if doc.get("kind") == "revert":
        return f"REACT #{i}: revert #{doc.get('reverts')}"
    swaps = doc.get("swaps") or []
    what = ", ".join(f"{s.get('symbol', '')} {s.get('a')}<->{s.get('b')}".strip() for s in swaps[:3])
    more = f" +{len(swaps) - 3}" if len(swaps) > 3 else ""
    return f"REACT #{i}: {doc.get('kind', 'decision')}" + (f" ({what}{more})" if what else "")


class _Builder:
    """Collects events, numbering processes and lanes as they appear."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.pids: dict[tuple[int, Any], int] = {}
        self.lanes: dict[int, list[float]] = {}   # pid -> end time (µs) of each lane

    def process(self, key: tuple[int, Any], name: str) -> int:
        pid = self.pids.get(key)
        if pid is None:
            pid = self.pids[key] = len(self.pids) + 1
            self.events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            self.events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                                "args": {"sort_index": pid}})
        return pid

    def thread(self, pid: int, tid: int, name: str) -> None:
        self.events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
        self.events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                            "args": {"sort_index": tid}})

    def lane(self, pid: int, ts: float, end: float, prefix: str = "flows") -> int:
        """The first lane (thread) of ``pid`` free at ``ts`` (a new one, named ``prefix k``, if none),
        now busy until ``end``."""
        ends = self.lanes.setdefault(pid, [])
        for i, e in enumerate(ends):
            if e <= ts:
                ends[i] = end
                return i + 1
        ends.append(end)
        self.thread(pid, len(ends), f"{prefix} {len(ends)}")
        return len(ends)


def _flow_events(b: _Builder, ri: int, run: TraceRun, tr: EpochTrace, t0: float, tracks: Tracks) -> None:
    p = tr.pattern
    keys, names = tracks(tr)
    src_host, dst_host = tr.meta.get("src_host"), tr.meta.get("dst_host")
    order = np.lexsort((np.arange(p.num_flows), tr.start))
    for i in order.tolist():
        ts, end = _us(t0 + tr.start[i]), _us(t0 + tr.end[i])
        key = int(keys[i])
        pid = b.process((ri, key), _label(run, names.get(key, str(key))))
        fct = float(tr.end[i] - tr.start[i])
        nbytes = float(tr.flow_bytes[i])
        s, d, t = int(p.src[i]), int(p.dst[i]), int(p.step[i])
        args: dict[str, Any] = {"flow": i, "epoch": int(tr.epoch), "step": t, "src": s, "dst": d,
                                "chunk_graph": int(p.flow_graph[i]), "op": "reduce" if int(p.op[i]) == 0 else "copy",
                                "bytes": nbytes, "fct_us": round(fct * _US, 3),
                                "rate_Gbps": round(nbytes * 8 / fct / 1e9, 6) if fct > 0 else None}
        if src_host is not None and dst_host is not None:
            args["src_host"], args["dst_host"] = int(src_host[i]), int(dst_host[i])
        b.events.append({"ph": "X", "cat": "flow", "name": f"{s}→{d} step {t}", "pid": pid,
                         "tid": b.lane(pid, ts, end), "ts": ts, "dur": round(end - ts, 3), "args": args})


def _run_events(b: _Builder, ri: int, run: TraceRun, tracks: Tracks) -> None:
    starts = run.epoch_starts()
    pid = b.process((ri, "epochs"), _label(run, run.unit + "s"))
    for tr, t0 in zip(run.traces, starts, strict=True):
        algbw, busbw = tr.algbw, tr.busbw
        ts, dur = _us(t0), _us(tr.duration)
        b.events.append({"ph": "X", "cat": "epoch", "name": f"{run.unit} {tr.epoch}", "pid": pid,
                         "tid": b.lane(pid, ts, ts + dur, run.unit + "s"), "ts": ts, "dur": dur,
                         "args": {"epoch": int(tr.epoch), "pattern": tr.pattern.name, "flows": tr.pattern.num_flows,
                                  "message_bytes": float(tr.message_bytes),
                                  "algbw_GBps": round(algbw / 1e9, 6) if math.isfinite(algbw) else None,
                                  "busbw_GBps": round(busbw / 1e9, 6) if math.isfinite(busbw) else None}})
        _flow_events(b, ri, run, tr, float(t0), tracks)
    if run.decisions:
        b.thread(pid, _REACT_TID, "REACT")
    last = {int(tr.epoch): k for k, tr in enumerate(run.traces)}     # an epoch may be several calls (DDP)
    first = {int(tr.epoch): k for k, tr in reversed(list(enumerate(run.traces)))}
    for i, d in enumerate(run.decisions):
        doc = _decision_fields(d)
        k = last.get(int(doc.get("epoch", -1)))
        if k is None:          # made after an epoch this run does not hold: nowhere to put it
            continue
        at = _us(starts[k] + run.traces[k].duration)
        eff = first.get(int(doc.get("effective_epoch", -1)))
        doc["applied"] = eff is not None
        name = _decision_name(i, doc)
        b.events.append({"ph": "i", "s": "t", "cat": "react", "name": name, "pid": pid, "tid": _REACT_TID, "ts": at,
                         "args": doc})
        if eff is not None:
            b.events.append({"ph": "i", "s": "p", "cat": "react", "name": f"{name} applied", "pid": pid,
                             "tid": _REACT_TID,
                             "ts": _us(starts[eff]), "args": {"decision": i, "epoch": doc.get("effective_epoch")}})


def chrome_trace(runs: Sequence[TraceRun], tracks: Tracks = by_rank,
                 metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The trace-event document of ``runs`` (layout in the module docstring): ``{"traceEvents":
    [...], "displayTimeUnit": "ns", "otherData": {...}}``; ``metadata`` goes to ``otherData``.

    Raises:
        ValueError: more than :data:`MAX_EVENTS` events, or a run's ``starts`` that do not fit.
    """
    total = sum(t.pattern.num_flows + 1 for r in runs for t in r.traces)
    if total > MAX_EVENTS:
        raise ValueError(f"trace: {total:,} flows and epochs are more than {MAX_EVENTS:,} events; trace fewer "
                         "epochs or ranks")
    b = _Builder()
    for ri, run in enumerate(runs):
        _run_events(b, ri, run, tracks)
    other = {"generator": "reactccl", "time_unit": "ts and dur in microseconds"}
    other.update(metadata or {})
    return {"traceEvents": b.events, "displayTimeUnit": "ns", "otherData": other}


def write_chrome_trace(path: str, runs: Sequence[TraceRun], tracks: Tracks = by_rank,
                       metadata: Mapping[str, Any] | None = None) -> int:
    """Write :func:`chrome_trace` of ``runs`` to ``path`` (checked by :func:`check_trace_events`
    first); returns the number of events written.

    Raises:
        ValueError: see :func:`chrome_trace`; OSError: the file cannot be written.
    """
    doc = chrome_trace(runs, tracks, metadata)
    check_trace_events(doc)
    with open(path, "w") as f:
        json.dump(doc, f, allow_nan=False, separators=(",", ":"))
    return len(doc["traceEvents"])


_PH = {"X", "i", "M"}
_META = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index",
         "thread_sort_index": "sort_index"}


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_trace_events(doc: Any) -> None:
    """Check ``doc`` is a trace-event document as this module writes them: an object with a list
    ``traceEvents``; every event an object with ``ph`` (``X``, ``i`` or ``M``), a string ``name``,
    integer ``pid`` and ``tid``; ``X``: numbers ``ts`` and ``dur >= 0``; ``i``: a number ``ts`` and
    scope ``s`` in ``t``/``p``/``g``; ``M``: a known name with its ``args`` field (a string name or an
    integer sort index); ``args``, where present, an object; no NaN or infinity anywhere (not JSON).

    Raises:
        ValueError: naming the first event (index) and field that is wrong.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError("trace: expected an object with a list 'traceEvents'")
    for k, ev in enumerate(doc["traceEvents"]):
        where = f"traceEvents[{k}]"
        if not isinstance(ev, dict):
            raise ValueError(f"{where}: expected an object, got {type(ev).__name__}")
        ph = ev.get("ph")
        if ph not in _PH:
            raise ValueError(f"{where}.ph: expected one of {sorted(_PH)}, got {ph!r}")
        if not isinstance(ev.get("name"), str):
            raise ValueError(f"{where}.name: expected a string")
        for f in ("pid", "tid"):
            if not isinstance(ev.get(f), int) or isinstance(ev.get(f), bool):
                raise ValueError(f"{where}.{f}: expected an integer, got {ev.get(f)!r}")
        if "args" in ev and not isinstance(ev["args"], dict):
            raise ValueError(f"{where}.args: expected an object")
        if ph in ("X", "i") and not _number(ev.get("ts")):
            raise ValueError(f"{where}.ts: expected a finite number of microseconds, got {ev.get('ts')!r}")
        if ph == "X" and not (_number(ev.get("dur")) and ev["dur"] >= 0):
            raise ValueError(f"{where}.dur: expected a finite number >= 0, got {ev.get('dur')!r}")
        if ph == "i" and ev.get("s", "t") not in ("t", "p", "g"):
            raise ValueError(f"{where}.s: expected 't', 'p' or 'g', got {ev.get('s')!r}")
        if ph == "M":
            field_ = _META.get(ev["name"])
            value = (ev.get("args") or {}).get(field_) if field_ else None
            ok = isinstance(value, str) if field_ == "name" else isinstance(value, int)
            if field_ is None or not ok:
                raise ValueError(f"{where}: metadata {ev['name']!r} needs args.{field_ or 'name'}")
    try:
        json.dumps(doc, allow_nan=False)
    except ValueError as e:
        raise ValueError(f"trace: not plain JSON ({e})") from None

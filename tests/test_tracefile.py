"""Chrome trace-event JSON (Perfetto) from EpochTraces: the file's fields and types, slices that are
the traces' flows to the nanosecond, lanes that never overlap, REACT's decisions as instants (none
for a decision past the run's end), and the CLI's --trace on simulate and demo."""

import json

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.cli.main import main
from reactccl.trace import EpochTrace
from reactccl.tracefile import MAX_EVENTS, TraceRun, check_trace_events, chrome_trace, write_chrome_trace


def _trace(epoch, starts, ends, pattern=None, nbytes=1e6):
    p = pattern if pattern is not None else generate("ring", 2)     # 4 flows: 0->1 and 1->0 in 2 steps
    F = p.num_flows
    s, e = np.asarray(starts, float), np.asarray(ends, float)
    assert s.shape == (F,)
    return EpochTrace(epoch, p, 2e6, s, e, np.full(F, nbytes), float(e.max()))


def _slices(doc, cat="flow"):
    return [ev for ev in doc["traceEvents"] if ev["ph"] == "X" and ev.get("cat") == cat]


def _names(doc, what="process_name"):
    return {ev["pid"]: ev["args"]["name"] for ev in doc["traceEvents"] if ev["ph"] == "M" and ev["name"] == what}


def test_slices_are_the_flows_in_microseconds_back_to_back():
    p = generate("ring", 2)
    a = _trace(0, [0.0] * p.num_flows, [2e-6 + 1e-6 * i for i in range(p.num_flows)])
    b = _trace(1, [1e-6] * p.num_flows, [5e-6] * p.num_flows)
    doc = chrome_trace([TraceRun("", [a, b])])
    check_trace_events(doc)
    flows = _slices(doc)
    assert len(flows) == 2 * p.num_flows
    t0_b = a.duration                                   # epoch 1 starts when epoch 0 ends
    for ev in flows:
        tr = a if ev["args"]["epoch"] == 0 else b
        off = 0.0 if tr is a else t0_b
        i = ev["args"]["flow"]
        assert ev["ts"] == pytest.approx((off + tr.start[i]) * 1e6, abs=1e-3)
        assert ev["dur"] == pytest.approx((tr.end[i] - tr.start[i]) * 1e6, abs=1e-3)
        assert (ev["args"]["src"], ev["args"]["dst"]) == (int(p.src[i]), int(p.dst[i]))
        assert ev["args"]["bytes"] == 1e6
        # 1 MB in (end - start) seconds, in Gbps
        assert ev["args"]["rate_Gbps"] == pytest.approx(8e6 / (tr.end[i] - tr.start[i]) / 1e9, rel=1e-6)
        assert _names(doc)[ev["pid"]] == f"rank {ev['args']['src']}"
    epochs = _slices(doc, "epoch")
    # ends 2, 3, 4, 5 µs: epoch 0 lasts 5 µs, epoch 1 (ends 5 µs) starts at 5 µs
    assert [(ev["name"], ev["ts"], ev["dur"]) for ev in epochs] == [("epoch 0", 0.0, 5.0), ("epoch 1", 5.0, 5.0)]
    # 2 MB in 5 µs: 400 GB/s algbw; ring on 2 ranks: busbw = algbw x 2(n-1)/n = algbw
    assert epochs[0]["args"]["algbw_GBps"] == pytest.approx(400.0, rel=1e-9)
    assert epochs[0]["args"]["busbw_GBps"] == pytest.approx(epochs[0]["args"]["algbw_GBps"], rel=1e-9)


def test_overlapping_sends_of_one_rank_go_to_separate_lanes_that_never_overlap():
    p = generate("nccl-tree", 8)                        # two trees: a rank sends in both at once
    rng = np.random.default_rng(3)
    start = rng.uniform(0, 1e-3, p.num_flows)
    tr = _trace(0, start, start + rng.uniform(1e-6, 1e-3, p.num_flows), p)
    doc = chrome_trace([TraceRun("", [tr])])
    lanes: dict = {}
    for ev in _slices(doc):
        lanes.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
    assert max(tid for _, tid in lanes) > 1             # some rank needed a second lane
    for spans in lanes.values():
        spans.sort()
        assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False))
    threads = {ev["args"]["name"] for ev in doc["traceEvents"] if ev["ph"] == "M" and ev["name"] == "thread_name"}
    assert threads >= {"epochs 1", "flows 1", "flows 2"}


class _D:
    """A decision as the tuner's log holds it (fields the writer reads)."""

    def __init__(self, epoch, effective, kind="transform"):
        self.epoch, self.effective_epoch, self.kind = epoch, effective, kind

    def to_dict(self):
        return {"epoch": self.epoch, "effective_epoch": self.effective_epoch, "kind": self.kind,
                "swaps": [{"symbol": "①", "a": 1, "b": 2}], "pattern": {"src": [0], "dst": [1]}}


def test_decisions_are_instants_and_one_past_the_end_is_not_applied():
    p = generate("ring", 2)
    traces = [_trace(e, [0.0] * p.num_flows, [1e-6] * p.num_flows) for e in range(4)]
    doc = chrome_trace([TraceRun("REACT", traces, decisions=[_D(0, 2), _D(2, 9)])])
    check_trace_events(doc)
    inst = [ev for ev in doc["traceEvents"] if ev["ph"] == "i"]
    names = [(ev["name"], ev["ts"]) for ev in inst]
    # decided after epoch 0 (ends at 1 µs), applied at epoch 2's start (2 µs); the second, made after
    # epoch 2 for epoch 9 of a 4-epoch run, is shown where it was made and never as applied
    assert names == [("REACT #0: transform (① 1<->2)", 1.0), ("REACT #0: transform (① 1<->2) applied", 2.0),
                     ("REACT #1: transform (① 1<->2)", 3.0)]
    assert [ev["args"].get("applied") for ev in inst if "applied" in ev["args"]] == [True, False]
    assert "pattern" not in inst[0]["args"]                # not the whole pattern per instant
    assert set(_names(doc).values()) == {"REACT: epochs", "REACT: rank 0", "REACT: rank 1"}


@pytest.mark.parametrize("bad, what", [
    ({"traceEvents": {}}, "list 'traceEvents'"),
    ({"traceEvents": [{"ph": "B", "name": "x", "pid": 1, "tid": 1, "ts": 0}]}, "ph"),
    ({"traceEvents": [{"ph": "X", "name": "x", "pid": "1", "tid": 1, "ts": 0, "dur": 1}]}, "pid"),
    ({"traceEvents": [{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 0, "dur": -1}]}, "dur"),
    ({"traceEvents": [{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": float("nan"), "dur": 1}]}, "ts"),
    ({"traceEvents": [{"ph": "i", "name": "x", "pid": 1, "tid": 1, "ts": 0, "s": "q"}]}, ".s"),
    ({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {}}]}, "args.name"),
    ({"traceEvents": [{"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "args": [1]}]}, "args"),
])
def test_check_names_what_is_wrong(bad, what):
    with pytest.raises(ValueError, match=what.replace(".", r"\.").replace("(", r"\(")):
        check_trace_events(bad)


def test_too_many_events_are_refused_before_anything_is_built(monkeypatch):
    import reactccl.tracefile as tf
    monkeypatch.setattr(tf, "MAX_EVENTS", 5)
    p = generate("ring", 4)                              # 2(n - 1) steps of n flows: 24 flows
    with pytest.raises(ValueError, match="25 flows and epochs are more than 5 events"):
        chrome_trace([TraceRun("", [_trace(0, np.zeros(p.num_flows), np.ones(p.num_flows) * 1e-6, p)])])
    assert MAX_EVENTS >= 1_000_000


def test_write_is_plain_json(tmp_path):
    p = generate("ring", 2)
    out = tmp_path / "t.json"
    F = p.num_flows
    n = write_chrome_trace(str(out), [TraceRun("", [_trace(0, np.zeros(F), np.full(F, 1e-6))])], metadata={"k": 1})
    doc = json.loads(out.read_text())
    assert len(doc["traceEvents"]) == n and doc["otherData"]["k"] == 1
    check_trace_events(doc)


def test_simulate_trace_lines_up_with_the_runs_epochs(tmp_path, capsys):
    out = tmp_path / "sim.json"
    args = ["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-s", "1MB", "-e", "3", "--json"]
    assert main(args + ["--trace", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    doc = json.loads(out.read_text())
    check_trace_events(doc)
    epochs = _slices(doc, "epoch")
    assert [ev["dur"] for ev in epochs] == pytest.approx([d * 1e6 for d in res["durations_s"]], abs=1e-3)
    assert len(_slices(doc)) == 3 * generate("ring", 4).num_flows


def test_demo_trace_has_both_runs_and_refuses_an_unwritable_file(tmp_path, capsys):
    out = tmp_path / "demo.json"
    assert main(["demo", "--ranks", "4", "--epochs", "6", "--warmup", "1", "--size", "1MB", "--p", "1",
                 "--topology", "star:hosts=5", "--no-progress", "--trace", str(out)]) == 0
    doc = json.loads(out.read_text())
    check_trace_events(doc)
    procs = set(_names(doc).values())
    assert {"baseline: epochs", "REACT: epochs", "baseline: rank 0", "REACT: rank 3"} <= procs
    assert len(_slices(doc, "epoch")) == 12
    assert main(["demo", "--epochs", "2", "--trace", str(tmp_path / "no" / "x.json")]) == 2
    assert "--trace" in capsys.readouterr().err

"""Trace files of real ranks (2-rank Gloo): the records kept per call, gathered to rank 0, give the
same EpochTrace as the runtime's own gather, and the file's slices are those flows, call by call;
ReactAllReduce(trace=) and perf --trace write one file per job on rank 0."""

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from reactccl.algorithms import generate  # noqa: E402
from reactccl.runtime import RCollective  # noqa: E402
from reactccl.runtime.local import run_local  # noqa: E402
from reactccl.runtime.tracing import gather_traces  # noqa: E402
from reactccl.tracefile import TraceRun, check_trace_events, chrome_trace  # noqa: E402

pytestmark = pytest.mark.torch


def _plain(t):
    return {"epoch": t.epoch, "start": t.start.tolist(), "end": t.end.tolist(), "bytes": t.flow_bytes.tolist(),
            "duration": t.duration, "t0": t.meta["t0"]}


def _child_calls(rank, world):
    rc = RCollective(generate("ring", world))
    rc.keep_records()
    x = torch.arange(1000, dtype=torch.float32) * (rank + 1)
    for _ in range(3):
        rc(x)
    last = rc.gather_trace()             # the runtime's own join of the last call (all_gather path)
    traces = gather_traces([rc])
    rc.close()
    if rank != 0:
        return traces
    doc = chrome_trace([TraceRun.on_clock("", traces, unit="call")])
    return {"traces": [_plain(t) for t in traces], "last": _plain(last), "doc": doc,
            "sum": float(x[7].item())}


def test_a_two_rank_gloo_trace_lines_up_with_its_epoch_traces():
    res = run_local(_child_calls, 2, timeout=120)
    assert res[1] is None                    # only rank 0 joins the records
    got = res[0]
    assert got["sum"] == 7 * (1 + 2) * 2 ** 2    # x doubled by each of 3 calls after the first sum: 7*3*2*2
    traces, last = got["traces"], got["last"]
    assert [t["epoch"] for t in traces] == [0, 1, 2]
    assert traces[-1] == last                # same flows, starts, ends, duration and t0
    p = generate("ring", 2)
    doc = got["doc"]
    check_trace_events(doc)
    flows = [ev for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "flow"]
    assert len(flows) == 3 * p.num_flows
    t00 = traces[0]["t0"]
    for ev in flows:
        t = traces[ev["args"]["epoch"]]
        i = ev["args"]["flow"]
        assert ev["ts"] == pytest.approx((t["t0"] - t00 + t["start"][i]) * 1e6, abs=2e-3)
        assert ev["dur"] == pytest.approx((t["end"][i] - t["start"][i]) * 1e6, abs=2e-3)
        assert ev["args"]["bytes"] == t["bytes"][i] == 2000.0      # half of 1000 float32 per ring step
        assert (ev["args"]["src"], ev["args"]["dst"]) == (int(p.src[i]), int(p.dst[i]))
    calls = [ev for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "epoch"]
    assert [c["name"] for c in calls] == ["call 0", "call 1", "call 2"]
    assert [c["dur"] for c in calls] == pytest.approx([t["duration"] * 1e6 for t in traces], abs=2e-3)
    assert [c["ts"] for c in calls] == pytest.approx([(t["t0"] - t00) * 1e6 for t in traces], abs=2e-3)


def _child_allreduce(rank, world, path):
    import reactccl.torch as rt
    ar = rt.ReactAllReduce(algorithm="ring", react=False, every=1, trace=path)
    x = torch.ones(4096)
    for _ in range(6):
        ar(x)
    ar.close()
    return float(x[0].item())


def test_react_allreduce_trace_is_written_by_the_leader_at_close(tmp_path):
    path = str(tmp_path / "ar.json")
    res = run_local(_child_allreduce, 2, path, timeout=180)
    assert res == [64.0, 64.0]               # 1 doubled by 6 sums on 2 ranks
    doc = json.loads(Path(path).read_text())
    check_trace_events(doc)
    epochs = [ev["args"]["epoch"] for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "epoch"]
    assert 1 <= len(epochs) <= 6 and epochs == sorted(epochs) and set(epochs) <= set(range(6))
    flows = [ev for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "flow"]
    assert len(flows) == len(epochs) * generate("ring", 2).num_flows
    assert not [ev for ev in doc["traceEvents"] if ev["ph"] == "i"]      # react=False: no decisions


def _child_perf(rank, world, path):
    from reactccl.experiments.perf_real import dist_sweep
    rows = dist_sweep(["ring"], [4096], iters=2, warmup=1, include_dist=False, trace_to=path)
    return len(rows)


def test_perf_trace_holds_every_call_of_the_sweep(tmp_path):
    path = str(tmp_path / "perf.json")
    assert run_local(_child_perf, 2, path, timeout=180) == [1, 1]
    doc = json.loads(Path(path).read_text())
    check_trace_events(doc)
    calls = [ev for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "epoch"]
    # per placement (out of place, in place): 1 warm-up + 2 timed + 1 checked call
    assert len(calls) == 8
    flows = [ev for ev in doc["traceEvents"] if ev["ph"] == "X" and ev["cat"] == "flow"]
    assert len(flows) == 8 * generate("ring", 2).num_flows
    assert np.all(np.diff([c["ts"] for c in calls]) > 0)

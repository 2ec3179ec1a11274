"""RCollective on real Gloo process groups (localhost, 3-5 processes, every wait bounded).

Each test starts one group and runs many cases inside it (starting processes
costs seconds on CI's 2 cores); the children return plain data and the
assertions run here.
"""

import os
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from reactccl.algorithms import generate  # noqa: E402
from reactccl.pattern import PatternBuilder, VerificationError  # noqa: E402
from reactccl.runtime import FlowTimeoutError, MismatchError, RCollective, block_bounds  # noqa: E402
from reactccl.runtime.layout import SEND  # noqa: E402
from reactccl.runtime.local import run_local  # noqa: E402
from runtime_patterns import copy_after_reduce, rd_one_chunk, write_after_send  # noqa: E402

pytestmark = pytest.mark.torch
UNIT = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


# ---------------------------------------------------------------- patterns
def flow_id(p, step, src, dst):
    return int(np.flatnonzero((p.step == step) & (p.src == src) & (p.dst == dst))[0])


class _DelayedWork:
    def __init__(self, post, delay):
        self.post, self.delay = post, delay

    def wait(self, timeout=None):
        time.sleep(self.delay)
        return self.post().wait(timeout=timeout)


class SlowFlow(RCollective):
    """Posts one flow's send ``delay`` seconds late (from a waiter thread), to force reorderings."""

    def __init__(self, pattern, slow_flow, delay, **kw):
        super().__init__(pattern, **kw)
        self.slow_flow, self.delay = slow_flow, delay

    def _post(self, op, buf):
        if op.kind == SEND and op.flow == self.slow_flow:
            return _DelayedWork(lambda: RCollective._post(self, op, buf), self.delay)
        return super()._post(op, buf)


# ---------------------------------------------------------------- children
def _inputs(rank, numel, dtype):
    g = torch.Generator().manual_seed(1000 + rank)
    if dtype.is_floating_point:
        return torch.randn(numel, generator=g).to(dtype)
    return torch.randint(-1000, 1000, (numel,), generator=g, dtype=dtype)


def _expected(p, x, rank):
    """(expected result, mask of elements the collective defines on this rank) via torch's collectives."""
    n = dist.get_world_size()
    coll = p.collective.value
    if coll == "broadcast":
        y = x.clone()
        dist.broadcast(y, src=p.root)
        return y, torch.ones(x.numel(), dtype=torch.bool)
    if coll == "allgather":
        parts = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(parts, x)
        b = block_bounds(n, x.numel())
        y = torch.cat([parts[r][b[r]:b[r + 1]] for r in range(n)])
        return y, torch.ones(x.numel(), dtype=torch.bool)
    y = x.clone()
    dist.all_reduce(y)
    mask = torch.ones(x.numel(), dtype=torch.bool)
    if coll == "reducescatter":
        b = block_bounds(n, x.numel())
        mask[:] = False
        mask[b[rank]:b[rank + 1]] = True
    elif coll == "reduce":
        mask[:] = rank == p.root
    return y, mask


# "pooled": the data-driven executor with waiter threads (as for large messages) and pipeline
# parts even on these small test messages; "data" at these sizes runs the direct executor
MODES = {"data": {}, "stepwise": {"mode": "stepwise"},
         "pooled": {"mode": "data", "direct_bytes": 0, "pipeline_bytes": 16, "max_parts": 3},
         "mixed": {"mode": "data"},   # with _TINY = 0: direct only on ranks with one receive per step
         "mixedpipe": {"mode": "data", "pipeline_bytes": 16, "max_parts": 3}}   # the same, pipelined


def _collective(p, mode):
    import reactccl.runtime.rcollective as rcmod
    rcmod._TINY = 0 if mode.startswith("mixed") else 64 << 10
    return RCollective(p, timeout=20, **MODES[mode])


def _exact_cases(rank, world, cases):
    """Integer collectives: returns [(label, ok)]."""
    out = []
    for label, p, numel, mode in cases:
        x = _inputs(rank, numel, torch.int64)
        want, mask = _expected(p, x, rank)
        rc = _collective(p, mode)
        got = rc(x.clone())
        ok = torch.equal(got[mask], want[mask])
        if p.collective.value == "reducescatter":   # the defined part is exactly this rank's block
            ok = ok and torch.equal(rc.block(got), want[mask])
        out.append((label, bool(ok)))
    return out


def _float_cases(rank, world, cases):
    """Float AllReduce: returns [(label, max |err| / bound, identical on all ranks)]."""
    out = []
    for label, p, numel, dtype, *mode in cases:
        x = _inputs(rank, numel, dtype)
        allx = [torch.empty(numel, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(allx, x.double())
        ref = torch.stack(allx).sum(0)
        ku = (world - 1) * UNIT[dtype]
        bound = ku / (1 - ku) * torch.stack(allx).abs().sum(0)     # gamma(N-1) * sum |x_i|
        got = RCollective(p, timeout=20, **MODES[mode[0] if mode else "data"])(x.clone()).double()
        ratio = float(((got - ref).abs() / bound.clamp_min(1e-300)).max())
        every = [torch.empty_like(got) for _ in range(world)]
        dist.all_gather(every, got)
        same = all(torch.equal(e, every[0]) for e in every)
        out.append((label, ratio, same))
    return out


def _child_world3(rank, world):
    ring, tree, tree4 = generate("ring", 3), generate("nccl-tree", 3), generate("nccl-tree", 3, slices=4)
    car, was = copy_after_reduce(), write_after_send()
    cases = []
    for name, p in (("ring", ring), ("nccl-tree", tree), ("nccl-tree/4", tree4), ("car", car), ("was", was)):
        for numel in (0, 1, 10, 1001):
            for mode in ("data", "stepwise", "pooled", "mixed", "mixedpipe"):
                cases.append((f"{name} n={numel} {mode}", p, numel, mode))
    res = {"exact": _exact_cases(rank, world, cases)}
    res["float"] = _float_cases(rank, world, [(f"{nm} {dt} {m}", p, 999, dt, m)
                                              for nm, p in (("ring", ring), ("tree", tree))
                                              for dt in (torch.float32, torch.float16, torch.bfloat16)
                                              for m in ("data", "pooled")])
    # copy-after-reduce with rank 2's step-0 reduce into rank 0 posted 0.4 s late: rank 0 gets
    # the step-2 copy first and must hold it until the reduce is applied
    slow = flow_id(car, 0, 2, 0)
    x = _inputs(rank, 7, torch.int64)
    want, _ = _expected(car, x, rank)
    res["late_reduce"] = all(
        bool(torch.equal(SlowFlow(car, slow, 0.4 if rank == 2 else 0.0, timeout=20, **MODES[m])(x.clone()), want))
        for m in ("data", "pooled"))
    # the trace of a 10-element int64 ring: chunk bounds [0,3,7,10] -> 24, 32, 24 bytes per flow
    rc = RCollective(ring, timeout=20)
    rc(torch.arange(10))
    tr = rc.gather_trace()
    res["trace"] = dict(bytes=tr.flow_bytes.tolist(), chunk=[int(ring.chunk_idx[ring.chunk_ptr[f]])
                                                             for f in range(ring.num_flows)],
                        fct_min=float(tr.fct.min()), end_max=float(tr.end.max()), duration=tr.duration,
                        message=tr.message_bytes, start=tr.start.tolist())
    # a REACT swap: same collective object, same group, relabelled pattern
    # a non-contiguous tensor is reduced through a contiguous copy and written back
    x = _inputs(rank, 12, torch.int64)
    want, _ = _expected(ring, x, rank)
    strided = x.clone().view(3, 4).t()
    rc(strided)
    res["strided"] = bool(torch.equal(strided.t().reshape(-1), want))
    swapped = ring.relabel([2, 0, 1])
    rc.set_pattern(swapped)
    x = _inputs(rank, 11, torch.int64)
    want, _ = _expected(ring, x, rank)
    res["swap"] = bool(torch.equal(rc(x.clone()), want)) and rc.gather_trace().pattern == swapped
    return res


def _child_world5(rank, world):
    pats = [generate("ring", 5), generate("nccl-tree", 5), generate("rabenseifner", 5),
            generate("ring-allgather", 5), generate("recursive-doubling", 5), generate("ring-reducescatter", 5),
            generate("binomial-broadcast", 5, root=2), generate("binomial-reduce", 5, root=3)]
    cases = [(f"{p.name} n={numel}", p, numel, "data") for p in pats for numel in (1, 7, 13, 100)]
    cases += [(f"{p.name} n={n} {m}", p, n, m) for p in pats for n, m in ((13, "stepwise"), (13, "pooled"),
                                                                          (100, "pooled"), (100, "mixed"))]
    return {"exact": _exact_cases(rank, world, cases),
            "float": _float_cases(rank, world, [(f"{p.name} {dt}", p, 257, dt) for p in pats[:3]
                                                for dt in (torch.float32, torch.float16, torch.bfloat16)])}


def _child_world4(rank, world):
    rd = rd_one_chunk(4)
    cases = [(f"rd-1chunk n={n} {m}", rd, n, m) for n in (1, 5, 64) for m in ("data", "stepwise", "pooled")]
    res = {"exact": _exact_cases(rank, world, cases),
           "float": _float_cases(rank, world, [(f"rd-1chunk {dt}", rd, 100, dt)
                                               for dt in (torch.float32, torch.float16, torch.bfloat16)])}
    # rank 1's step-0 send to rank 0 is late, so rank 2's step-1 data reaches rank 0 before rank 0
    # has staged its own step-1 send of the same chunk: it must send the pre-step value
    slow = flow_id(rd, 0, 1, 0)
    x = _inputs(rank, 9, torch.int64)
    want, _ = _expected(rd, x, rank)
    res["late_send"] = all(
        bool(torch.equal(SlowFlow(rd, slow, 0.4 if rank == 1 else 0.0, timeout=20, **MODES[m])(x.clone()), want))
        for m in ("data", "pooled"))
    # above 64 KiB the calling thread runs a rank only where its receive times stay exact: every
    # ring rank; no recursive-doubling rank (its next send waits for the last one to leave)
    res["direct"] = {name: RCollective(generate(name, 4), timeout=20)._schedule(100_000, 4, False)[1] is not None
                     for name in ("ring", "recursive-doubling")}
    # clock offsets: one machine -> exactly 0; pretending to be 4 hosts runs the ping-pong,
    # which must find the shared clock (offset ~ 0, error below half a round trip)
    from reactccl.runtime import clock
    res["offset_same"] = clock.clock_offset()
    clock.machine_id = lambda: f"host{rank}"
    res["offset_pingpong"] = clock.clock_offset()
    return res


def _child_mismatch(rank, world):
    ring = generate("ring", 3)
    msgs = []
    for make in (lambda: torch.zeros(10 + (rank == 1)), lambda: torch.zeros(10, dtype=torch.int32 if rank else torch.float32)):
        try:
            RCollective(ring, timeout=10)(make())
            msgs.append("no error")
        except MismatchError as e:
            msgs.append(str(e))
    try:
        RCollective(ring if rank else ring.relabel([1, 0, 2]), timeout=10)(torch.zeros(4))
        msgs.append("no error")
    except MismatchError as e:
        msgs.append(str(e))
    # a pattern that does not compute its collective is refused before anything is sent
    broken = PatternBuilder("allreduce", 3)
    c = broken.chunk(1.0, 0)
    broken.flow(0, 0, 1, [c])
    try:
        RCollective(broken.build())
        msgs.append("no error")
    except VerificationError as e:
        msgs.append(f"VerificationError: {e}")
    # a size change on one rank only, after the others checked theirs: rank 1 waits in the check,
    # the others in their flows; both give up after the timeout (3 s) with an error, not a hang
    rc = RCollective(ring, timeout=3)
    rc(torch.zeros(10))
    try:
        rc(torch.zeros(10 + (rank == 1)))
        msgs.append("no error")
    except (MismatchError, FlowTimeoutError) as e:
        msgs.append(f"{type(e).__name__}: {e}")
    return msgs


def _child_dead_peer(rank, world, how):
    ring = generate("ring", 3)
    rc = RCollective(ring, timeout=3)
    rc(torch.ones(6))  # agreement checked; the next call goes straight to p2p
    if rank == 2:
        if how == "dies":
            time.sleep(0.5)   # let the first call's last bytes reach the others first
            os._exit(3)
        time.sleep(5)  # stalls past the others' timeout (3 s)
        return "stalled"
    t = time.monotonic()
    try:
        rc(torch.ones(6))
        return ("no error", time.monotonic() - t)
    except FlowTimeoutError as e:
        return (str(e), time.monotonic() - t, e.step, e.peer, e.chunks)


# ------------------------------------------------------------------- tests
def _check(res):
    bad = [label for label, ok in res["exact"] if not ok]
    assert not bad, f"wrong results: {bad}"
    for label, ratio, same in res["float"]:
        assert ratio <= 1.0, f"{label}: error {ratio:.3g} x the stated bound"
        assert same, f"{label}: ranks hold different values"


def test_allreduce_patterns_three_ranks_exact_float_trace_swap():
    results = run_local(_child_world3, 3, timeout=240)
    for res in results:
        _check(res)
        assert res["late_reduce"] and res["swap"] and res["strided"]
    tr = results[0]["trace"]
    assert tr["bytes"] == [[24.0, 32.0, 24.0][c] for c in tr["chunk"]]
    assert sum(tr["bytes"]) == 320 and tr["message"] == 80
    assert tr["fct_min"] >= 0 and tr["end_max"] <= tr["duration"] + 1e-9
    assert all(r["trace"]["start"] == tr["start"] for r in results)  # every rank assembles the same trace


def test_five_ranks_every_collective():
    for res in run_local(_child_world5, 5, timeout=300):
        _check(res)


def test_send_while_receiving_same_chunk_uses_pre_step_value():
    for res in run_local(_child_world4, 4, timeout=180):
        _check(res)
        assert res["late_send"]
        assert res["direct"] == {"ring": True, "recursive-doubling": False}
        assert res["offset_same"] == 0.0 and abs(res["offset_pingpong"]) < 0.05


def test_mismatched_sizes_dtypes_patterns_raise_on_every_rank():
    for rank, msgs in enumerate(run_local(_child_mismatch, 3, timeout=120)):
        assert "10 elements here, 11 on rank 1" in msgs[0] or "11 elements here, 10 on rank 0" in msgs[0]
        assert "dtype" in msgs[1]
        assert "pattern digest" in msgs[2]
        assert msgs[3].startswith("VerificationError") and "missing" in msgs[3]
        if rank == 1:
            assert msgs[4].startswith("MismatchError") and "did not complete within 3 s" in msgs[4]
        else:
            assert msgs[4].startswith("FlowTimeoutError") and "step" in msgs[4]


@pytest.mark.parametrize("how", ["dies", "stalls"])
def test_dead_or_stalled_peer_fails_within_timeout_naming_the_flow(how):
    res = run_local(_child_dead_peer, 3, how, timeout=90, allow_errors=True)
    for rank in (0, 1):
        msg, took, step, peer, chunks = res[rank]
        assert "RCollective on rank" in msg and "flow" in msg and "step" in msg
        assert took < 3 + 5  # the timeout plus slack for a loaded machine
        assert step is not None and peer is not None and chunks


def _child_nccl(rank, world):
    dev = torch.device("cuda", torch.cuda.current_device())
    out = []
    for name in ("ring", "nccl-tree"):
        p = generate(name, world)
        for dtype in (torch.int64, torch.float32):
            x = _inputs(rank, 1001, dtype).to(dev)
            want = x.clone()
            dist.all_reduce(want)
            rc = RCollective(p, timeout=30)
            got = rc(x.clone())
            tr = rc.gather_trace()
            close = torch.equal(got, want) if dtype == torch.int64 else torch.allclose(got, want, rtol=1e-5, atol=1e-5)
            out.append((f"{name} {dtype}", bool(close), float(tr.fct.min())))
    return out


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 GPUs (NCCL)")
def test_nccl_on_cuda_tensors_same_code_path():
    for res in run_local(_child_nccl, 2, timeout=180, backend="nccl"):
        for label, ok, fct_min in res:
            assert ok, label
            assert fct_min >= 0, label


def test_local_run_error_is_exported():
    import reactccl.runtime as runtime
    from reactccl.runtime.local import LocalRunError
    assert runtime.LocalRunError is LocalRunError and "LocalRunError" in runtime.__all__

"""The control plane survives its peers (issue 33): faults injected on real Gloo ranks. Each
ends with the job finishing on the last agreed pattern, or a named error on every rank within
its timeout; no process aborts (a Gloo size mismatch used to kill the leader with SIGABRT)."""

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from reactccl.algorithms import generate  # noqa: E402
from reactccl.runtime.local import run_local  # noqa: E402
from reactccl.torch import ReactAllReduce  # noqa: E402

pytestmark = pytest.mark.torch


class _Shift:
    """Answers its second trace with ``make(pattern)``: a shifted ring by default."""

    def __init__(self, pattern, make=None):
        self.pattern, self.n = pattern, 0
        self.make = make or (lambda p: p.relabel(np.roll(np.arange(p.num_ranks), 1)))

    def observe(self, trace):
        self.n += 1
        return self.make(self.pattern) if self.n == 2 else None


def _train(ar, rank, epochs=6):
    ok = []
    for e in range(epochs):
        x = torch.arange(12, dtype=torch.int64) * (rank + 1) + e
        want = x.clone()
        dist.all_reduce(want)
        ar(x)
        ok.append(bool(torch.equal(x, want)))
    return ok


def _finish(ar, rank, first):
    """Train, close, and say what happened: every epoch right, tuning frozen and why, changes."""
    t = time.monotonic()
    ok = _train(ar, rank)
    time.sleep(0.5)
    ar.close()
    return dict(ok=ok, frozen=ar.tuner.frozen, changes=len(ar.changes), same=ar.pattern is first,
                took=time.monotonic() - t)


def _child_frame_skew(rank, world):
    from reactccl.runtime import wire
    if rank == 1:      # a rank framing with another size (another version, or a bug)
        wire.INLINE_BYTES = 4097
    t = time.monotonic()
    try:
        ReactAllReduce(algorithm="ring", every=1, delay=1, timeout=20)
        return ("no error", 0.0)
    except ValueError as e:
        return (str(e), time.monotonic() - t)


def test_ranks_that_frame_differently_all_refuse_to_start():
    res = run_local(_child_frame_skew, 3, timeout=120)      # raises if a process aborts
    for msg, took in res:
        assert "disagree on the control-plane frame size" in msg and "1: 4097" in msg and "0: 4096" in msg, msg
        assert took < 20


def _child_late_skew(rank, world):
    from reactccl.runtime import wire
    ring = generate("ring", world)
    ar = ReactAllReduce(algorithm=ring, controller=_Shift(ring), every=1, delay=1, timeout=20)
    if rank == 1:      # the size changes after the ranks agreed on it: this rank used to send 4097-byte frames
        wire.INLINE_BYTES = 4097
    ok = _train(ar, rank)
    time.sleep(0.5)
    ar.close()
    return dict(ok=ok, frozen=ar.tuner.frozen, changes=[(a.round, a.epoch) for a in ar.changes])


def test_frames_keep_the_size_the_ranks_agreed_on():
    res = run_local(_child_late_skew, 3, timeout=120)      # the leader used to die of SIGABRT (exit -6)
    for r in res:
        assert all(r["ok"]) and not r["frozen"] and r["changes"] == [(1, 3)], r


def _child_worker_fault(rank, world, fault):
    from reactccl.runtime import wire
    ring = generate("ring", world)
    ar = ReactAllReduce(algorithm=ring, controller=_Shift(ring), every=1, delay=1, timeout=20)
    if rank == 1 and fault == "long frame":        # its next frame comes out one byte too long
        frame = wire._frame
        wire._frame = lambda data, device, size=wire.INLINE_BYTES: frame(data + b" ", device, size + 1)
    if rank == 1 and fault == "unsendable":        # its records cannot be encoded
        def refuse(obj, max_bytes=wire.MAX_MESSAGE_BYTES):
            raise wire.MessageError("control-plane message of 70000000 bytes is over the limit of 67108864")
        wire.encode = refuse
    return _finish(ar, rank, ring)


@pytest.mark.parametrize("fault, words", [
    ("long frame", "rank 1 could not send its control-plane message: control-plane frame of 4097"),
    ("unsendable", "rank 1 could not send its control-plane message: control-plane message of 70000000 bytes"),
])
def test_a_worker_that_cannot_frame_its_records_freezes_tuning_everywhere(fault, words):
    res = run_local(_child_worker_fault, 3, fault, timeout=120)
    for r in res:   # every epoch right, no change applied, the reason named on every rank, quickly
        assert all(r["ok"]) and r["changes"] == 0 and r["same"], r
        assert "leader failed in round 0" in r["frozen"] and words in r["frozen"], r["frozen"]
        assert r["took"] < 20, r


def _unverifiable(ring):
    op = ring.op.copy()
    op[np.flatnonzero(op == 0)[-1]] = 1        # the last reduce becomes a copy: a contribution is lost
    return ring.replace(op=op)


def _child_bad_announcement(rank, world, kind):
    from reactccl.runtime import rtuner
    ring = generate("ring", world)
    make = {"ranks": lambda p: generate("ring", world * 2), "unverifiable": _unverifiable}.get(kind)
    if rank == 0 and kind in ("ranks", "unverifiable"):     # a leader that skips its own checks
        rtuner.verify = lambda p: None
        rtuner.RTuner._check_fits = lambda self, p, what="": None
    if rank == 2 and kind == "one rank":                    # only rank 2 cannot run the new pattern
        def fails(p):
            from reactccl.pattern import VerificationError
            raise VerificationError("rank 2's check failed")
        rtuner.verify = fails
    ar = ReactAllReduce(algorithm=ring, controller=_Shift(ring, make), every=1, delay=1, timeout=20)
    return _finish(ar, rank, ring)


@pytest.mark.parametrize("kind, rank, words", [
    ("ranks", 1, "ControlPlaneError: the announced pattern ring has 6 ranks, the job has 3"),
    ("unverifiable", 1, "VerificationError: "),
    ("one rank", 2, "VerificationError: rank 2's check failed"),
])
def test_a_bad_announcement_is_refused_by_every_rank(kind, rank, words):
    res = run_local(_child_bad_announcement, 3, kind, timeout=120)
    for r in res:   # the job finishes on the first pattern; every rank names the rank that refused and why
        assert all(r["ok"]) and r["changes"] == 0 and r["same"], r
        assert f"round 1: rank {rank} refused the announced pattern version 1: " in r["frozen"], r["frozen"]
        assert words in r["frozen"], r["frozen"]
        assert r["took"] < 20, r

"""Issue 11, the runtime: decisions that do not fit the job, a dead peer, no pickle on the
control plane, and what the job listens on. Gloo groups on localhost (run_local)."""

import json
import os
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from reactccl.algorithms import generate  # noqa: E402
from reactccl.runtime import LocalRecord  # noqa: E402
from reactccl.runtime.listen import bound_store, control_interface, interface_of  # noqa: E402
from reactccl.runtime.local import run_local  # noqa: E402
from reactccl.runtime.records import record_from_wire, record_to_wire  # noqa: E402
from reactccl.runtime.wire import MessageError, decode, encode  # noqa: E402
from reactccl.torch import ReactAllReduce  # noqa: E402

pytestmark = pytest.mark.torch


# ------------------------------------------------------------ no processes
def _record():
    return LocalRecord(1, 7, 0.1 + 0.2, 1 / 3, np.array([3, 5]), np.array([np.pi, np.e]), np.array([8, 16]),
                       np.array([4]), np.array([2.0 ** 0.5]), 4096, (1 << 63) - 5, -1e-7)


def test_records_travel_as_plain_json_exactly():
    rec = _record()
    text = json.dumps(record_to_wire(rec))
    back = record_from_wire(json.loads(text))
    for f in ("rank", "epoch", "enter", "exit", "message_bytes", "digest", "clock_offset"):
        assert getattr(back, f) == getattr(rec, f), f
    for f in ("sent", "sent_start", "sent_bytes", "recv", "recv_end"):
        assert np.array_equal(getattr(back, f), getattr(rec, f)), f   # floats bit-identical


@pytest.mark.parametrize("field, value, words", [
    ("sent", [1, "os.system"], "'sent'"), ("sent", [-1], "'sent'"), ("enter", float("nan"), "'enter'"),
    ("recv_end", [1.0, 2.0], "differ in length"), ("rank", True, "'rank'"), ("digest", 1.5, "'digest'")])
def test_record_from_wire_checks_every_field(field, value, words):
    d = record_to_wire(_record())
    d[field] = value
    with pytest.raises(ValueError, match=words):
        record_from_wire(d)
    with pytest.raises(ValueError, match="expected the fields"):
        record_from_wire({**record_to_wire(_record()), "__reduce__": 1})


def test_wire_refuses_what_is_not_plain_json():
    import pickle
    with pytest.raises(MessageError, match="not plain JSON"):
        encode({"x": float("nan")})
    with pytest.raises(MessageError, match="not plain JSON"):
        encode({"x": object()})
    with pytest.raises(MessageError, match="over the limit"):
        encode("x" * 100, max_bytes=50)
    for bad in (pickle.dumps({"a": 1}), b"\xff\xfe", b"[" * 100_000):
        with pytest.raises(MessageError, match="from rank 3 is not valid JSON"):
            decode(bad, "rank 3")
    assert decode(encode({"a": [1, 2.5, None]})) == {"a": [1, 2.5, None]}


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp writes them) listening on ``port``."""
    out = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            local, state = ln.split()[1], ln.split()[3]
            if state == "0A" and int(local.split(":")[1], 16) == port:
                out.append(local.split(":")[0])
    return out


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc/net/tcp")
def test_store_listens_on_the_address_given_only():
    store = bound_store("127.0.0.1", 0, 1, is_master=True, timeout=10)
    store.set("k", "v")
    assert store.get("k") == b"v"
    assert _listening(store.port) == ["0100007F"]   # 127.0.0.1, not 0.0.0.0 / ::
    del store


def test_control_interface_follows_gloo_ifname_then_master_addr(monkeypatch):
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7,eth8")
    assert control_interface() == "eth7"
    monkeypatch.delenv("GLOO_SOCKET_IFNAME")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    lo = interface_of("127.0.0.1")
    assert lo is not None and control_interface() == lo
    monkeypatch.delenv("MASTER_ADDR")
    assert control_interface() is None


# ------------------------------------------------------------ Gloo groups
class _Wrong:
    """Answers its second trace with a pattern that does not fit the job."""

    def __init__(self, pattern, kind):
        self.kind, self.n, self.world = kind, 0, pattern.num_ranks

    def observe(self, trace):
        self.n += 1
        if self.n == 2:
            return generate("ring", self.world + 1) if self.kind == "ranks" else generate("ring-allgather", self.world)
        return None


def _child_wrong_decision(rank, world, kind):
    ring = generate("ring", world)
    ar = ReactAllReduce(algorithm=ring, controller=_Wrong(ring, kind), every=1, delay=1, timeout=20)
    ok = []
    for e in range(6):
        x = torch.arange(12, dtype=torch.int64) * (rank + 1)
        want = x.clone()
        dist.all_reduce(want)
        ar(x)
        ok.append(bool(torch.equal(x, want)))
    ar.close()
    return dict(ok=ok, frozen=ar.tuner.frozen, changes=len(ar.changes), same=ar.pattern is ring)


@pytest.mark.parametrize("kind, words", [("ranks", "has 4 ranks, the job has 3"),
                                         ("collective", "computes allgather, the job runs allreduce")])
def test_decision_that_does_not_fit_is_not_announced(kind, words):
    res = run_local(_child_wrong_decision, 3, kind, timeout=120)
    for r in res:   # every epoch right on every rank, the first pattern kept, and said why
        assert all(r["ok"]) and r["changes"] == 0 and r["same"], r
        assert "leader failed in round 1" in r["frozen"] and words in r["frozen"], r["frozen"]


def _child_peer_dies(rank, world):
    ar = ReactAllReduce(algorithm=generate("ring", world), react=False, timeout=3)
    x = torch.ones(8)
    ar(x)
    if rank == 2:
        time.sleep(0.5)
        os._exit(3)
    time.sleep(1.0)   # rank 2 is gone: every later call fails
    errors = []
    for _ in range(3):
        try:
            ar(x)
            errors.append(("none", ""))
        except Exception as e:  # noqa: BLE001 - the type is what is tested
            errors.append((type(e).__name__, str(e)))
    return errors


def test_dead_peer_is_a_named_error_on_every_later_call():
    res = run_local(_child_peer_dies, 3, timeout=90, allow_errors=True)
    for rank in (0, 1):
        kinds = [k for k, _ in res[rank]]
        assert kinds == ["FlowTimeoutError"] * 3, res[rank]
        assert "broke in epoch 1" in res[rank][1][1] and "broke in epoch 1" in res[rank][2][1]


class _Boom:
    """Unpickling this creates a file: what a pickled control-plane message could do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _child_pickle_payload(rank, world, path):
    import pickle

    from reactccl.runtime import wire
    ring = generate("ring", world)
    ar = ReactAllReduce(algorithm=ring, controller=_Wrong(ring, "ranks"), every=1, delay=1, timeout=20)
    if rank == 1:   # a hostile peer puts a pickle where its records go
        wire.encode = lambda obj, max_bytes=wire.MAX_MESSAGE_BYTES: pickle.dumps(_Boom(path))
    x = torch.ones(8, dtype=torch.int64)
    for _ in range(4):
        ar(x.fill_(1))
    time.sleep(0.5)
    ar.close()
    return dict(frozen=ar.tuner.frozen, sum=int(x[0]))


def test_control_plane_never_unpickles(tmp_path):
    path = str(tmp_path / "pwned")
    res = run_local(_child_pickle_payload, 3, path, timeout=120)
    assert not os.path.exists(path)
    assert "rank 1 is not valid JSON" in res[0]["frozen"], res[0]["frozen"]
    assert all(r["sum"] == 3 and r["frozen"] for r in res)   # training went on with the first pattern


def _child_framed_messages(rank, world):
    from reactccl.runtime.wire import INLINE_BYTES, broadcast_json, gather_json
    got = []
    for n in (1, INLINE_BYTES - 20, INLINE_BYTES - 8, INLINE_BYTES, 3 * INLINE_BYTES + 7):
        # messages of different lengths on different ranks, some within the first frame, some not
        g = gather_json({"r": rank, "s": "x" * (n * (rank + 1) // 2)}, dst=1)
        b = broadcast_json({"s": "y" * n} if rank == 2 else None, src=2)
        got.append((g, b))
    sub = dist.new_group([1, 2, 3])     # group ranks differ from global ranks
    if rank in (1, 2, 3):
        got.append((gather_json("z" * (rank * 5000), dst=3, group=sub),
                    broadcast_json("q" * 9000 if rank == 2 else None, src=2, group=sub)))
    return got


def test_gather_and_broadcast_json_frame_long_and_short_messages():
    from reactccl.runtime.wire import INLINE_BYTES
    res = run_local(_child_framed_messages, 4, timeout=120)
    sizes = (1, INLINE_BYTES - 20, INLINE_BYTES - 8, INLINE_BYTES, 3 * INLINE_BYTES + 7)
    for rank, got in enumerate(res):
        for (g, b), n in zip(got, sizes):
            assert g == ([{"r": r, "s": "x" * (n * (r + 1) // 2)} for r in range(4)] if rank == 1 else None)
            assert b == {"s": "y" * n}
        if rank:
            g, b = got[-1]
            assert g == (["z" * (r * 5000) for r in (1, 2, 3)] if rank == 3 else None)
            assert b == "q" * 9000

"""The DDP hook's bucket thread (no processes: a stand-in state records the calls)."""

import threading
import time

import pytest

torch = pytest.importorskip("torch")

from reactccl.torch.ddp import BucketWorker  # noqa: E402


class FakeState:
    """What BucketWorker uses of ReactAllReduce: run(tensor, end_epoch), average, world."""

    def __init__(self, world=4, average=False, fail_at=None, delay=0.0):
        self.world, self.average, self.fail_at, self.delay = world, average, fail_at, delay
        self.calls, self.threads = [], set()
        self.release = threading.Event()

    def run(self, tensor, end_epoch=True):
        self.threads.add(threading.current_thread().name)
        self.release.wait(5)
        time.sleep(self.delay)
        if len(self.calls) == self.fail_at:
            self.calls.append(("failed", end_epoch))
            raise RuntimeError("flow 3 (step 1, receive from rank 2) did not complete")
        tensor.mul_(self.world)   # stands for the sum over ranks of equal inputs
        self.calls.append((float(tensor[0]), end_epoch))
        return tensor


def test_futures_complete_in_order_off_the_calling_thread_with_the_average():
    st = FakeState()
    w = BucketWorker(st)
    bufs = [torch.full((3,), float(i + 1)) for i in range(3)]
    futs = [w.submit(b, end_epoch=(i == 2)) for i, b in enumerate(bufs)]
    assert not any(f.done() for f in futs)          # returned before the collective ran
    st.release.set()
    got = [f.wait() for f in futs]
    assert [g.tolist() for g in got] == [[1.0] * 3, [2.0] * 3, [3.0] * 3]   # sum / world = the input
    assert [c[1] for c in st.calls] == [False, False, True]               # epoch ends at the last bucket
    assert st.threads == {"react-ddp-buckets"}
    w.stop()


def test_after_a_failure_queued_buckets_fail_at_once():
    st = FakeState(fail_at=1, delay=0.0)
    st.release.set()
    w = BucketWorker(st)
    futs = [w.submit(torch.ones(2), end_epoch=False) for _ in range(4)]
    assert futs[0].wait().tolist() == [1.0, 1.0]
    for f in futs[1:]:
        with pytest.raises(RuntimeError, match="did not complete|an earlier bucket failed"):
            f.wait()
    assert len(st.calls) == 2          # the two after the failure never ran
    w.stop()


def test_average_in_state_is_not_applied_twice():
    st = FakeState(world=2, average=True)
    st.release.set()
    w = BucketWorker(st)
    assert w.submit(torch.ones(2), True).wait().tolist() == [2.0, 2.0]
    w.stop()

"""Waiters: the threads that wait on c10d requests end when closed and keep no job alive.

Why it matters: a thread dropping the last reference to a c10d Work while the interpreter
finalizes aborts the process (see reactccl/runtime/waiters.py); the testbed saw it.
"""

import gc
import threading
import time
import weakref

from reactccl.runtime.waiters import Waiters


class _Job:
    """Stands for a c10d Work: something a job holds that must not outlive it."""


def test_close_joins_every_thread():
    pool = Waiters("t-join").ensure(3)
    threads = [t for t in threading.enumerate() if t.name.startswith("t-join")]
    assert len(threads) == 3 and pool.size == 3
    done = []
    for i in range(5):
        pool.submit(done.append, i)
    assert pool.close(timeout=5.0) == []
    assert sorted(done) == [0, 1, 2, 3, 4]  # queued jobs ran before the threads ended
    assert not any(t.is_alive() for t in threads)
    assert pool.size == 0


def test_close_names_a_thread_still_blocked():
    pool = Waiters("t-stuck").ensure(1)
    release = threading.Event()
    pool.submit(release.wait, 10.0)
    t0 = time.monotonic()
    assert pool.close(timeout=0.2) == ["t-stuck-0"]
    assert time.monotonic() - t0 < 2.0
    release.set()


def test_an_idle_thread_holds_no_reference_to_its_last_job():
    pool = Waiters("t-ref").ensure(1)
    ran = threading.Event()
    job = _Job()
    ref = weakref.ref(job)
    pool.submit(lambda j: ran.set(), job)
    assert ran.wait(5.0)
    del job
    for _ in range(50):  # the thread drops its arguments right after the call
        gc.collect()
        if ref() is None:
            break
        time.sleep(0.02)
    assert ref() is None
    pool.close()


def test_a_closed_pool_grows_again():
    pool = Waiters("t-again").ensure(2)
    pool.close()
    out = []
    pool.ensure(1).submit(out.append, 7)
    assert pool.close(timeout=5.0) == [] and out == [7]

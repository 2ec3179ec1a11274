"""Threads that wait on c10d requests for RCollective's data-driven executor.

A Gloo request only completes when someone waits on it, and a wait blocks its thread, so
every request in flight needs a thread of its own (fewer could leave a finished request
unseen behind one that waits for a peer, which may be waiting for us). :class:`Waiters`
keeps that many threads alive between calls; ``submit(fn, *args)`` hands a job to an idle
one through one queue (cheaper than ``concurrent.futures``: no Future per job).

Shutdown: a thread that drops the last reference to a c10d ``Work`` releases and retakes
the GIL (torch frees a Work without it). If the interpreter is already finalizing, retaking
the GIL ends the thread with a forced unwind through a ``noexcept`` destructor, and the
process aborts ("terminate called without an active exception"; seen in the testbed, the
core dump showed a waiter thread in ``PyWork`` dealloc inside ``Py_FinalizeEx``). So a
thread lets go of its job's arguments before it waits for the next one, and
:meth:`Waiters.close` joins the threads, so none is still running when the process ends.
"""

from __future__ import annotations

import queue
import threading
import time

__all__ = ["Waiters"]


class Waiters:
    """A set of daemon threads running submitted jobs; :meth:`ensure` grows it to ``n`` threads."""

    def __init__(self, name: str = "rcollective-wait") -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._name = name
        self._threads: list[threading.Thread] = []

    @property
    def size(self) -> int:
        """How many threads are running (or were started and not yet closed)."""
        return len(self._threads)

    def ensure(self, n: int) -> Waiters:
        """Make sure at least ``n`` threads exist (so ``n`` jobs can block at once); returns self."""
        while len(self._threads) < n:
            t = threading.Thread(target=_loop, args=(self._jobs,), name=f"{self._name}-{len(self._threads)}",
                                 daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def submit(self, fn, *args) -> None:
        """Run ``fn(*args)`` on a free thread (``fn`` reports its own result and errors)."""
        self._jobs.put((fn, args))

    def close(self, timeout: float = 10.0) -> list[str]:
        """Let every thread end once the jobs queued before this are done, and wait up to
        ``timeout`` seconds in all for them. Returns the names of threads still running
        then (a job blocked on a request that never completes; its own timeout ends it)."""
        threads, self._threads = self._threads, []
        for _ in threads:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout
        for t in threads:
            if t is not threading.current_thread():
                t.join(max(deadline - time.monotonic(), 0.0))
        return [t.name for t in threads if t.is_alive()]


def _loop(jobs: queue.SimpleQueue) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, args = job
        del job
        fn(*args)
        del fn, args  # no Work stays referenced by an idle thread (see the module docstring)

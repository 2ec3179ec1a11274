"""Threads that wait on c10d requests for RCollective's data-driven executor.

A Gloo request only completes when someone waits on it, and a wait blocks its thread, so
every request in flight needs a thread of its own (fewer could leave a finished request
unseen behind one that waits for a peer, which may be waiting for us). :class:`Waiters`
keeps that many threads alive between calls; ``submit(fn, *args)`` hands a job to an idle
one through one queue (cheaper than ``concurrent.futures``: no Future per job).
"""

from __future__ import annotations

import queue
import threading

__all__ = ["Waiters"]


class Waiters:
    """A set of daemon threads running submitted jobs; :meth:`ensure` grows it to ``n`` threads."""

    def __init__(self, name: str = "rcollective-wait") -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._name = name
        self.size = 0

    def ensure(self, n: int) -> Waiters:
        """Make sure at least ``n`` threads exist (so ``n`` jobs can block at once); returns self."""
        while self.size < n:
            threading.Thread(target=_loop, args=(self._jobs,), name=f"{self._name}-{self.size}", daemon=True).start()
            self.size += 1
        return self

    def submit(self, fn, *args) -> None:
        """Run ``fn(*args)`` on a free thread (``fn`` reports its own result and errors)."""
        self._jobs.put((fn, args))

    def close(self) -> None:
        """Let every thread end once the jobs queued before this are done."""
        for _ in range(self.size):
            self._jobs.put(None)
        self.size = 0


def _loop(jobs: queue.SimpleQueue) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, args = job
        fn(*args)

"""Epochs of one job on several replicas of a network, one process each, so that a run uses
more than one core (``replicas=2`` on the 2-core machines ns-3 runs on here).

ns-3 is single-threaded and an epoch's packets cannot be split across processes, but REACT only
changes the pattern at some epochs: most epochs run the pattern of the one before. A
:class:`ReplicaCluster` therefore keeps ``W`` copies of the executor, each in its own process
(built there by a picklable ``factory``), and runs epoch ``e`` on one copy while the next copies
already run epochs ``e + 1 .. e + W - 1`` of the same pattern *speculatively*. When the caller then
asks for one of those epochs with that pattern, its result is (or will soon be) there; when it asks
with another pattern, the speculative run is dropped and the epoch is run again.

What this changes in the model (say so where its numbers are reported):

* every replica is an independent network with its own simulated clock, background flows and TCP
  connections; a connection's state (congestion window) carries from one epoch to the next epoch
  *that replica* runs, not across replicas. Replica ``w`` draws its random streams as ns-3 run
  ``rng_run + w``;
* an epoch's ECMP draws stay those of its global index (``network.epoch`` is set to it), so
  placements, ports and background specs mean what they mean on one replica;
* a dropped speculative epoch still advanced its replica's clock and connection state.

A driver that knows the patterns ahead (REACT's decisions take effect ``apply_delay`` epochs
late, :mod:`reactccl.contract`) says so with :meth:`ReplicaCluster.expect`; the copies then run
those patterns ahead, and where ``replicas - 1 <= apply_delay`` (2 copies and REACT's default of
5) no epoch is dropped at a decision. Past the epochs it was told, and without such a driver, a
copy guesses the latest pattern it knows. The copies do not know where a run ends: they still run
up to ``replicas - 1`` epochs past it (waited for by :meth:`close`).

Which replica runs which epoch is decided from the sequence of requests alone (never from which
process finished first), so a run is reproducible; it is not bit-identical to a run on one replica.

Source: ours. It uses :class:`concurrent.futures.ProcessPoolExecutor` (one single-process pool per
replica, ``spawn`` start method: ns-3 cannot be forked once loaded).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Any

import numpy as np

from ..pattern import CollectivePattern, pattern_digest
from ..trace import EpochTrace
from ..traffic import ResolvedBackground
from .native import PacketSimError
from .network import PacketCluster

__all__ = ["ReplicaCluster", "packet_replicas"]

_executor: Any = None  # the replica's executor, in its own process


def _init(factory: Callable[[int], Any], index: int) -> None:
    global _executor
    try:
        _executor = factory(index)
    except Exception as exc:  # noqa: BLE001 - raised again by the first _run, so the caller sees it
        _executor = exc


def _run(epoch: int, pattern: CollectivePattern) -> tuple[EpochTrace, Any]:
    if isinstance(_executor, Exception):
        raise _executor
    net = getattr(_executor, "network", None)
    if net is not None:
        net.epoch = epoch
    return _executor.run_epoch(pattern), getattr(net, "_resolved", None)


class _Job:
    __slots__ = ("epoch", "key", "future", "dropped")

    def __init__(self, epoch: int, key: int, future: Future) -> None:
        self.epoch, self.key, self.future, self.dropped = epoch, key, future, False


class ReplicaCluster:
    """``run_epoch(pattern) -> EpochTrace`` on ``replicas`` copies of an executor (see the module
    docstring), as :class:`~reactccl.packetsim.PacketCluster` or
    :class:`~reactccl.netsim.SimulatedCluster` run it on one.

    Args:
        factory: picklable callable ``factory(replica_index) -> executor``, called once in each
            replica's process (e.g. ``functools.partial(make_packet_cluster, ...)``). The executor
            needs ``run_epoch(pattern)``; if it has a ``network`` with an ``epoch`` attribute, that
            is set to the global epoch index before each run.
        replicas: number of copies (processes), >= 1.
        timeout: seconds (wall) to wait for one epoch before :class:`PacketSimError`.

    Raises:
        ValueError: ``replicas < 1`` or a non-positive ``timeout``.
        PacketSimError: (from :meth:`run_epoch`) a replica died, failed to build or timed out; the
            message names the replica and the epoch. Errors raised by the executor itself (e.g.
            a flow not delivered) are re-raised as they are.
    """

    def __init__(self, factory: Callable[[int], Any], replicas: int = 2, timeout: float = 3600.0) -> None:
        if isinstance(replicas, bool) or not isinstance(replicas, (int, np.integer)) or replicas < 1:
            raise ValueError(f"replicas: expected an integer >= 1, got {replicas!r}")
        if not (timeout > 0):
            raise ValueError(f"timeout: expected seconds > 0, got {timeout!r}")
        ctx = multiprocessing.get_context("spawn")
        self.replicas, self.timeout, self.epoch = int(replicas), float(timeout), 0
        self._pools = [ProcessPoolExecutor(1, mp_context=ctx, initializer=_init, initargs=(factory, w))
                       for w in range(self.replicas)]
        self._jobs: list[list[_Job]] = [[] for _ in range(self.replicas)]   # assigned, in order
        #: per replica: epochs run whose result was used, and speculative runs dropped
        self.used = [0] * self.replicas
        self.dropped = [0] * self.replicas
        #: the replicas' background as resolved at their first epoch (``long_lived``, ``bulks``: the
        #: same on every replica), read back like a network's
        self.network = ResolvedBackground()
        self._expected: dict[int, tuple[int, CollectivePattern]] = {}   # epoch -> (digest, pattern)

    @property
    def lookahead(self) -> int:
        """Epochs run ahead of the one asked for (``replicas - 1``)."""
        return self.replicas - 1

    def expect(self, epoch: int, pattern: CollectivePattern) -> None:
        """Say that epoch ``epoch`` (after the next) will run ``pattern``: the copies run it ahead
        instead of the next epoch's pattern. A later :meth:`run_epoch` with another pattern still
        wins (the run is then dropped and made again)."""
        if epoch > self.epoch:
            self._expected[int(epoch)] = (pattern_digest(pattern), pattern)

    # ------------------------------------------------------------------ scheduling
    def _live(self, w: int) -> list[_Job]:
        return [j for j in self._jobs[w] if not j.dropped]

    def _assign(self, epoch: int, key: int, pattern: CollectivePattern) -> _Job:
        # the replica with the least live work, then the fewest runs (dropped ones) ahead of it,
        # then the lowest index: a function of the requests alone
        w = min(range(self.replicas), key=lambda i: (len(self._live(i)), len(self._jobs[i]), i))
        job = _Job(epoch, key, self._submit(w, epoch, pattern))
        self._jobs[w].append(job)
        return job

    def _submit(self, w: int, epoch: int, pattern: CollectivePattern) -> Future:
        if not self._pools:
            raise PacketSimError(f"this ReplicaCluster is closed; cannot run epoch {epoch}")
        try:
            return self._pools[w].submit(_run, epoch, pattern)
        except (BrokenProcessPool, RuntimeError) as exc:
            raise PacketSimError(f"replica {w} is gone ({exc}); cannot run epoch {epoch}") from None

    def _find(self, epoch: int, key: int) -> tuple[int, _Job] | None:
        for w, jobs in enumerate(self._jobs):
            for j in jobs:
                if not j.dropped and j.epoch == epoch and j.key == key:
                    return w, j
        return None

    def run_epoch(self, pattern: CollectivePattern) -> EpochTrace:
        """Run the next epoch of ``pattern`` (positions = ranks already mapped); returns its trace,
        whose ``epoch`` is the global index (see the class docstring for the errors)."""
        e, key = self.epoch, pattern_digest(pattern)
        self._expected = {k: v for k, v in self._expected.items() if k > e}
        ahead, last = {}, (key, pattern)
        for a in range(1, self.replicas):           # past what was told: the latest told pattern
            last = ahead[e + a] = self._expected.get(e + a, last)
        for w, jobs in enumerate(self._jobs):       # what no longer matches the requests is dropped
            for j in jobs:
                want = key if j.epoch == e else ahead.get(j.epoch, (j.key,))[0]
                if not j.dropped and (j.epoch < e or j.key != want):
                    j.dropped = True
                    self.dropped[w] += 1
        found = self._find(e, key)
        if found is None:
            self._assign(e, key, pattern)
        for f, (k, p) in ahead.items():              # the expected pattern, else the same one
            if self._find(f, k) is None:
                self._assign(f, k, p)
        w, job = self._find(e, key)
        trace, resolved = self._result(w, job)
        if resolved is not None:
            self.network._resolved = resolved
        jobs = self._jobs[w]                          # a replica runs its jobs in order: all before
        self._jobs[w] = jobs[jobs.index(job) + 1:]    # this one are done
        self.used[w] += 1
        self.epoch += 1
        return trace

    def _result(self, w: int, job: _Job) -> tuple[EpochTrace, Any]:
        try:
            return job.future.result(timeout=self.timeout)
        except FutureTimeout:
            raise PacketSimError(f"replica {w}: epoch {job.epoch} did not finish within {self.timeout:g} s "
                                 "of wall time") from None
        except BrokenProcessPool as exc:
            raise PacketSimError(f"replica {w} died while running epoch {job.epoch} ({exc})") from None

    def close(self) -> None:
        """Stop every replica's process (waits for the epoch each is running)."""
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)
        self._pools = []

    def __enter__(self) -> "ReplicaCluster":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _packet_cluster(index: int, args: tuple, kwargs: dict) -> Any:
    kw = dict(kwargs)
    kw["rng_run"] = int(kw.get("rng_run", 1)) + index
    return PacketCluster(*args, **kw)


def packet_replicas(replicas: int, *args: Any, timeout: float = 3600.0, **kwargs: Any) -> ReplicaCluster:
    """``PacketCluster(*args, **kwargs)`` on ``replicas`` replicas (replica ``w`` with ns-3 run
    ``rng_run + w``); the arguments must pickle (topologies, placements and background specs do).
    ``replicas=1`` is one PacketCluster in one worker process.

    Raises:
        ValueError: as :class:`ReplicaCluster`; a bad PacketCluster argument is reported by the
            first :meth:`~ReplicaCluster.run_epoch` (it is built in the replica's process).
    """
    return ReplicaCluster(partial(_packet_cluster, args=args, kwargs=kwargs), replicas, timeout)

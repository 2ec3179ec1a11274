"""The executor/controller contract, and the one loop that drives an executor with controllers.

An **executor** runs epochs: ``run_epoch(pattern) -> EpochTrace`` runs one epoch of a pattern
(positions already mapped to ranks) and times its flows. The fluid simulator
(:class:`reactccl.netsim.SimulatedCluster`), the packet engine (:class:`reactccl.packetsim.PacketCluster`,
:class:`~reactccl.packetsim.ReplicaCluster`), real ranks (:class:`reactccl.runtime.RealExecutor`) and
the NIC model of the tests (:class:`reactccl.tuner.synthetic.SyntheticExecutor`) are executors.
A network that runs several jobs in one epoch offers ``run_jobs`` instead; :func:`drive_jobs`
takes it as a function from the jobs' patterns to their traces.

A **controller** picks patterns: ``pattern_for_epoch(e)`` is the pattern epoch ``e`` runs, and
``observe(trace)`` is fed every epoch's trace in epoch order (it may return a decision, which a
driver does not need: the decision shows in later ``pattern_for_epoch`` answers).
:class:`reactccl.tuner.ReactController` is REACT's; :class:`StaticController` runs one pattern.

**Lookahead** (optional on both sides). An executor that runs epochs ahead of the one asked for
(``ReplicaCluster``: W copies of a network, W - 1 epochs ahead) has ``lookahead`` (int, epochs)
and ``expect(epoch, pattern)``. A controller that knows when its patterns can no longer change
has ``settled_through``: the last epoch whose pattern no later observation can change. REACT's
controller makes each decision take effect ``apply_delay`` = L epochs after the next one (§6.3),
so once it has seen epochs ``0 .. e - 1`` the patterns of epochs ``e .. e + L`` are settled. Before
each epoch the driver tells the executor those settled patterns (:func:`tell_ahead`); it then runs
them ahead instead of guessing that nothing changes, and never runs an epoch it must throw away
(with ``apply_delay = 0`` nothing ahead is settled and it guesses, as without this). A controller
without ``settled_through`` settles nothing ahead; :class:`StaticController` settles every epoch.

**The loop** (:class:`Drive`; :func:`drive` for one job, :func:`drive_jobs` for several jobs
sharing one network), per epoch ``e``:

1. tell the executor the settled patterns ahead (one executor only);
2. pick: ``pattern_for_epoch(e)`` of every controller; a pattern whose flows (src, dst) differ
   from the job's previous epoch counts as a change;
3. run: ``run_epoch`` (or ``run_jobs``), one trace per job;
4. observe: each controller gets its own job's trace;
5. record each job's duration, algbw and busbw; then the caller's ``on_epoch(e, traces)``.

Source: REACT §5.4 (the feedback loop), §6.3 (the decision delay); the contract is ours.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .pattern import CollectivePattern
from .trace import EpochTrace

__all__ = ["Executor", "LookaheadExecutor", "Controller", "StaticController", "Drive", "drive", "drive_jobs",
           "tell_ahead", "settled_through", "SETTLED_FOREVER"]

#: ``settled_through`` of a controller whose patterns never change.
SETTLED_FOREVER = 1 << 62


@runtime_checkable
class Executor(Protocol):
    """Runs one epoch of a pattern and times its flows."""

    def run_epoch(self, pattern: CollectivePattern) -> EpochTrace: ...


@runtime_checkable
class LookaheadExecutor(Executor, Protocol):
    """An executor that runs ``lookahead`` epochs ahead and can be told their patterns."""

    @property
    def lookahead(self) -> int: ...

    def expect(self, epoch: int, pattern: CollectivePattern) -> None: ...


@runtime_checkable
class Controller(Protocol):
    """Picks the pattern of every epoch and learns from its trace (``settled_through`` optional)."""

    def pattern_for_epoch(self, epoch: int) -> CollectivePattern: ...

    def observe(self, trace: EpochTrace) -> Any: ...


class StaticController:
    """The baseline: ``pattern`` at every epoch, nothing learnt, every epoch settled."""

    settled_through = SETTLED_FOREVER

    def __init__(self, pattern: CollectivePattern) -> None:
        self.pattern = pattern

    def pattern_for_epoch(self, epoch: int) -> CollectivePattern:
        """The fixed pattern."""
        return self.pattern

    def observe(self, trace: EpochTrace) -> None:
        """Nothing to learn."""


def settled_through(controller: Any, epoch: int) -> int:
    """The last epoch whose pattern ``controller`` can no longer change, before it runs ``epoch``:
    its ``settled_through``, or ``epoch`` itself for a controller without one (nothing ahead)."""
    return int(getattr(controller, "settled_through", epoch))


def tell_ahead(executor: Any, pattern_of: Callable[[int], CollectivePattern], epoch: int, settled: int,
               epochs: int) -> int:
    """Before running ``epoch``: tell ``executor`` (if it has ``expect``) the patterns of epochs
    ``epoch + 1 .. epoch + executor.lookahead`` that are at most ``settled`` and before ``epochs``
    (the run's length). ``pattern_of(e)`` gives epoch ``e``'s pattern. Returns how many it told."""
    expect = getattr(executor, "expect", None)
    ahead = int(getattr(executor, "lookahead", 0) or 0)
    told = 0
    if expect is None:
        return told
    for f in range(epoch + 1, min(epoch + ahead, settled, epochs - 1) + 1):
        expect(f, pattern_of(f))
        told += 1
    return told


def _same_flows(a: CollectivePattern, b: CollectivePattern) -> bool:
    return a is b or (np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst))


class Drive:
    """Controllers driving one executor (or one multi-job network) epoch by epoch: the loop of the
    module docstring. Step it with :meth:`step` (two arms in lock step) or run it with :meth:`run`.

    Args:
        controllers: one per job (:class:`Controller`).
        epochs: the run's length E (an int >= 1); lookahead never looks past it.
        executor: the executor of a single job (``len(controllers) == 1``); it is told the
            settled patterns ahead (:func:`tell_ahead`).
        run_jobs: for several jobs instead: ``run_jobs(patterns) -> traces``, one pattern and one
            trace per controller, in order.

    Attributes:
        epoch: epochs run so far.
        durations, algbw, busbw: per epoch and job, shape ``(E, J)`` (s, bytes/s, bytes/s); rows
            ``>= epoch`` are 0.
        changes: per job, how many epochs ran other flows than the epoch before.
        first, current: per job, the pattern of epoch 0 and of the last epoch run (epoch 0's before).
        traces: the last epoch's traces (empty before the first).

    Raises:
        ValueError: ``epochs`` not an integer >= 1, no controllers, or not exactly one of
            ``executor`` / ``run_jobs`` (an executor with several controllers).
        TypeError: an executor without ``run_epoch``, a controller without ``pattern_for_epoch``
            and ``observe``.
    """

    def __init__(self, controllers: Sequence[Controller], epochs: int, *, executor: Executor | None = None,
                 run_jobs: Callable[[list[CollectivePattern]], Sequence[EpochTrace]] | None = None) -> None:
        if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
            raise ValueError(f"epochs: expected an integer >= 1, got {epochs!r}")
        if not controllers:
            raise ValueError("drive: no controllers")
        for k, c in enumerate(controllers):
            if not isinstance(c, Controller):
                raise TypeError(f"controller {k}: {type(c).__name__} lacks pattern_for_epoch(epoch) or observe(trace)")
        if (executor is None) == (run_jobs is None):
            raise ValueError("drive: give exactly one of executor (one job) and run_jobs (several jobs)")
        if executor is not None:
            if not callable(getattr(executor, "run_epoch", None)):
                raise TypeError(f"executor: {type(executor).__name__} has no run_epoch(pattern) method")
            if len(controllers) != 1:
                raise ValueError(f"drive: an executor runs one job, got {len(controllers)} controllers")
        self.controllers = list(controllers)
        self.epochs, self.epoch = int(epochs), 0
        self.executor, self._run_jobs = executor, run_jobs
        shape = (self.epochs, len(self.controllers))
        self.durations, self.algbw, self.busbw = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self.changes = [0] * len(self.controllers)
        self.first = [c.pattern_for_epoch(0) for c in self.controllers]
        self.current = list(self.first)
        self.traces: list[EpochTrace] = []

    def step(self) -> list[EpochTrace]:
        """Run the next epoch of every job (steps 1-5 of the module docstring); returns its traces.

        Raises:
            RuntimeError: all ``epochs`` epochs have run.
            ValueError: ``run_jobs`` returned another number of traces than there are jobs.
        """
        e = self.epoch
        if e >= self.epochs:
            raise RuntimeError(f"drive: all {self.epochs} epochs have run")
        if self.executor is not None:
            ctl = self.controllers[0]
            tell_ahead(self.executor, ctl.pattern_for_epoch, e, settled_through(ctl, e), self.epochs)
        patterns = [c.pattern_for_epoch(e) for c in self.controllers]
        for k, p in enumerate(patterns):
            if not _same_flows(p, self.current[k]):
                self.changes[k] += 1
        self.current = patterns
        if self.executor is not None:
            traces = [self.executor.run_epoch(patterns[0])]
        else:
            assert self._run_jobs is not None
            traces = list(self._run_jobs(patterns))
            if len(traces) != len(patterns):
                raise ValueError(f"drive: run_jobs gave {len(traces)} traces for {len(patterns)} jobs at epoch {e}")
        for k, (c, tr) in enumerate(zip(self.controllers, traces, strict=True)):
            self.durations[e, k], self.algbw[e, k], self.busbw[e, k] = tr.duration, tr.algbw, tr.busbw
            c.observe(tr)
        self.traces = traces
        self.epoch += 1
        return traces

    def run(self, on_epoch: Callable[[int, list[EpochTrace]], Any] | None = None) -> Drive:
        """Step through the remaining epochs, calling ``on_epoch(e, traces)`` after each; returns self."""
        while self.epoch < self.epochs:
            e = self.epoch
            traces = self.step()
            if on_epoch is not None:
                on_epoch(e, traces)
        return self


def drive(executor: Executor, controller: Controller, epochs: int,
          on_epoch: Callable[[int, list[EpochTrace]], Any] | None = None) -> Drive:
    """Run ``epochs`` epochs of one job on ``executor``, its patterns picked by ``controller``
    (:class:`Drive`; ``on_epoch(e, [trace])`` after each epoch). Returns the finished drive.

    Raises:
        ValueError, TypeError: see :class:`Drive`; whatever the executor or controller raises.
    """
    return Drive([controller], epochs, executor=executor).run(on_epoch)


def drive_jobs(run_jobs: Callable[[list[CollectivePattern]], Sequence[EpochTrace]],
               controllers: Sequence[Controller], epochs: int,
               on_epoch: Callable[[int, list[EpochTrace]], Any] | None = None) -> Drive:
    """Run ``epochs`` epochs of several jobs that share one network: ``run_jobs(patterns)`` runs
    one epoch of all of them and returns their traces (:class:`Drive`). Returns the finished drive.

    Raises:
        ValueError, TypeError: see :class:`Drive`; whatever ``run_jobs`` or a controller raises.
    """
    return Drive(controllers, epochs, run_jobs=run_jobs).run(on_epoch)

"""``ReactAllReduce``: an AllReduce for training code that runs a REACT-tuned pattern.

    import reactccl.torch as rt
    allreduce = rt.ReactAllReduce()          # after dist.init_process_group("gloo" or "nccl")
    for step in ...:
        allreduce(grad)                      # in place, one epoch per call

With ``react=True`` (default) every rank starts an :class:`~reactccl.runtime.RTuner`
thread; the leader runs the REACT controller (``reactccl.tuner.ReactController``
unless ``controller=`` is given) and swaps ranks between pattern positions as it
finds congestion. ``react=False`` runs the static pattern (the baseline).

Source: REACT §6 (RCollective, RTuner); the epoch/batch/delay defaults are §5.4 and §6.3.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping

import torch
import torch.distributed as dist

from ..contract import StaticController
from ..pattern import Collective, CollectivePattern
from ..pattern.files import load_pattern
from ..runtime.faults import BrokenGroup
from ..runtime.grouping import HIERARCHICAL, ServerGrouping, learn_servers, server_pattern
from ..runtime.rcollective import RCollective
from ..runtime.rtuner import RTuner
from ..tuner import ReactController, ReactParams

__all__ = ["ReactAllReduce", "default_controller", "DEFAULT_EVERY"]

log = logging.getLogger(__name__)

#: Epochs per control-plane round by default. Each round costs every rank a gather and a
#: broadcast on the control group; batching three epochs cuts those to a third and the control
#: plane's CPU about in half (the leader still decodes and judges every epoch), while the
#: decisions' effective epochs (the controller's ``apply_delay``) stay as they are. With
#: REACT's ``apply_delay`` of 5 the ranks then have 3 epochs, not 5, to learn a decision.
DEFAULT_EVERY = 3


def default_controller(pattern: CollectivePattern, params=None):
    """REACT's controller for ``pattern`` (``reactccl.tuner.ReactController(pattern, params)``).

    ``params`` is a ``ReactParams``, or a mapping of its fields (as a JSON command line gives,
    e.g. ``{"estimator": "closed"}``).

    Raises:
        TypeError: ``params`` names a field ``ReactParams`` does not have.
    """
    if isinstance(params, Mapping):
        params = ReactParams(**params)
    return ReactController(pattern, params) if params is not None else ReactController(pattern)


class ReactAllReduce:
    """A sum AllReduce (in place) running a collective pattern on ``group``, tuned by REACT.

    Args:
        group: process group (default: the default group).
        algorithm: a registered generator name (``reactccl pattern list``) or a
            ready :class:`CollectivePattern` over the group's ranks; must be an AllReduce.
        react: run the REACT tuner (else the pattern stays static).
        controller: the controller the leader uses: an object with
            ``observe(trace)``, or a class/callable ``f(pattern)`` returning one;
            default :func:`default_controller`. Only the leader calls it.
        params: ``reactccl.tuner.ReactParams`` for the default controller (B, δ1, δ2, ...,
            ``apply_delay``), or a mapping of its fields (checked on every rank).
        every: epochs per control-plane round (:class:`RTuner`; 1 = the records go to the
            leader after every epoch). Default: :data:`DEFAULT_EVERY` (3) epochs in one exchange,
            or ``params.apply_delay`` if that is smaller (at least 1), so the ranks keep at least
            one epoch to learn a decision where ``apply_delay >= 1``. Fewer rounds cost less CPU (``bench/bench_ddp.py``
            shows ``every=1`` beside the default); the epoch a decision takes effect is the
            controller's either way.
        delay: the RTuner's delay (default ``params.apply_delay + 1 - every``: the latest
            deadline at which a decision made on any epoch of a round, effective
            ``apply_delay + 1`` epochs later, is still announced in time; REACT's 5 epochs
            with ``every=1``); a larger one is refused. ``every``, ``delay`` and ``params`` must
            be the same on every rank (the RTuner checks every and delay and raises otherwise).
        leader, control_ifname: see :class:`RTuner` (rank 0 by default).
        timeout: seconds any data-plane wait may take (:class:`RCollective`).
        control_timeout: seconds for control-plane exchanges (default ``timeout``).
        average: divide the sum by the group size (floating dtypes), as DDP wants.
        check: RCollective's agreement check (``"change"``, ``"always"``, ``"never"``).
        pattern: a pattern file (``reactccl.pattern/1`` JSON or MSCCL XML, e.g. one saved by
            ``reactccl simulate --react --save-pattern``) or a :class:`CollectivePattern`; used
            instead of ``algorithm`` (verified on load).
        servers: which ranks share a server, for ``ring`` and ``nccl-tree``: ``"auto"`` (default)
            learns it (:func:`~reactccl.runtime.grouping.learn_servers`: host identity, checked
            against torchrun's ``LOCAL_RANK``/``LOCAL_WORLD_SIZE``/``GROUP_RANK``; one all-gather) and
            builds NCCL's hierarchical pattern when there are several servers of several ranks each
            (:func:`~reactccl.runtime.grouping.server_pattern`; ``nics`` defaults to one per rank,
            give ``nics=`` when known), else the flat pattern; ``"flat"`` never learns (the flat
            pattern, as before servers existed); or a :class:`~reactccl.runtime.grouping.ServerGrouping`
            learned earlier. Ignored with a ready pattern or explicit ``servers=``/``gpus=``/
            ``hierarchy=`` generator options. The result is in :attr:`grouping` (None when not learned).
        trace: a file name: the leader writes every call's flows, and REACT's decisions, as Chrome
            trace-event JSON for Perfetto (:mod:`reactccl.tracefile`) when the object is closed. The
            records reach the leader through the RTuner's rounds (with ``react=False`` too: a tuner
            whose controller never changes the pattern), so calls of a last round not yet sent at
            :meth:`close` are left out. Give the same value on every rank (only the leader writes).
        **options: passed to the generator (e.g. ``slices=4`` for ``nccl-tree``).

    Raises:
        ValueError: the pattern is not an AllReduce or does not fit the group, or ``pattern``
            together with generator options.
        PatternError: the pattern file is malformed or does not verify.
        RuntimeError: torch.distributed is not initialised, or no controller is available.
        ValueError: ``every`` above ``params.apply_delay + 1``, or ``delay`` above
            ``params.apply_delay + 1 - every`` (a decision early in a round could not be announced
            before its epoch, and tuning would freeze at the first one); ranks given different
            ``every``/``delay``.
        TypeError, ValueError: ``params`` is a mapping that ``ReactParams`` refuses (every rank
            raises it).

    Shutdown: :meth:`close` stops the tuner and waiter threads and destroys the
    control group. Call it (on every rank) when the object is done with but the
    process goes on, e.g. before creating another one or re-initialising
    torch.distributed. Without it nothing goes wrong: the same happens when the
    object is garbage-collected or the interpreter exits, and a tuner thread that
    finds the process group destroyed under it (``dist.destroy_process_group()``
    at the end of a job) stops silently.
    """

    def __init__(self, group=None, algorithm: str | CollectivePattern = "nccl-tree", react: bool = True, *,
                 controller=None, params=None, every: int | None = None, delay: int | None = None, leader: int = 0,
                 timeout: float = 60.0, control_timeout: float | None = None, control_ifname: str | None = None,
                 average: bool = False, check: str = "change", pattern=None,
                 servers: str | ServerGrouping = "auto", trace: str | None = None, **options) -> None:
        if not dist.is_initialized():
            raise RuntimeError("ReactAllReduce: torch.distributed is not initialised (call init_process_group)")
        self.world = dist.get_world_size(group)
        if pattern is not None:
            if options:
                raise ValueError(f"ReactAllReduce: pattern= is a ready pattern; generator options "
                                 f"{sorted(options)} do not apply")
            algorithm = pattern if isinstance(pattern, CollectivePattern) else load_pattern(pattern)
            if algorithm.num_ranks != self.world:
                raise ValueError(f"ReactAllReduce: the pattern has {algorithm.num_ranks} ranks, the group "
                                 f"{self.world}")
        self.grouping = self._grouping(servers, algorithm, options, group)
        pattern = (algorithm if isinstance(algorithm, CollectivePattern)
                   else server_pattern(algorithm, self.world, self.grouping, **options))
        if pattern.collective is not Collective.ALLREDUCE:
            raise ValueError(f"ReactAllReduce needs an allreduce pattern, {pattern.name or 'the pattern'} "
                             f"computes {pattern.collective.value}")
        self.rc = RCollective(pattern, group, timeout=timeout, check=check)
        self.average = average
        self.tuner: RTuner | None = None
        writer = None
        if react or trace is not None:
            if isinstance(params, Mapping):      # checked on every rank, not on the leader alone
                params = ReactParams(**params)
            ctrl = None
            if self.rc.rank == leader:
                if not react:                    # tracing alone: a tuner that never changes the pattern
                    ctrl = StaticController(pattern)
                else:
                    ctrl = controller if controller is not None else (lambda p: default_controller(p, params))
                    if isinstance(ctrl, type) or not hasattr(ctrl, "observe"):
                        ctrl = ctrl(pattern)
            apply_delay = getattr(params, "apply_delay", 5)
            if every is None:
                every = max(1, min(DEFAULT_EVERY, apply_delay))
            latest = apply_delay + 1 - every
            if latest < 0:
                raise ValueError(f"ReactAllReduce: every={every} epochs per round is more than the controller's "
                                 f"apply_delay + 1 = {apply_delay + 1}; a decision early in a round could not "
                                 "reach the ranks before its epoch (give a smaller every)")
            if delay is None:
                delay = latest
            elif delay > latest:
                raise ValueError(f"ReactAllReduce: delay={delay} with every={every} puts a round's deadline after "
                                 f"the epoch a decision on its first epoch takes effect (apply_delay {apply_delay} "
                                 f"+ 1 epochs later); give delay <= apply_delay + 1 - every = {latest}")
            self.tuner = RTuner(self.rc, ctrl, leader=leader, every=every, delay=delay,
                                timeout=control_timeout or timeout, control_ifname=control_ifname)
            if trace is not None and self.tuner.is_leader:
                writer = _TraceWriter(trace, ctrl)
                self.tuner.on_trace = writer.traces.append
        self.epoch = 0
        self._records: list = []
        self._group = BrokenGroup("ReactAllReduce", self.rc.rank)  # remembers a failed data plane
        # close() at garbage collection or interpreter exit (weakref.finalize runs atexit),
        # so the tuner thread never outlives the process group unannounced.
        self._finalizer = weakref.finalize(self, _shutdown, self.tuner, self.rc, writer)

    def _grouping(self, servers, algorithm, options: dict, group) -> ServerGrouping | None:
        """The server grouping the pattern is built on (``servers`` argument), or None."""
        if isinstance(servers, ServerGrouping):
            if servers.num_ranks != self.world:
                raise ValueError(f"ReactAllReduce: servers= groups {servers.num_ranks} ranks, the group has "
                                 f"{self.world}")
            return servers
        if servers not in ("auto", "flat"):
            raise ValueError(f"ReactAllReduce: servers: expected 'auto', 'flat' or a ServerGrouping, got {servers!r}")
        if (servers == "flat" or not isinstance(algorithm, str) or algorithm not in HIERARCHICAL
                or any(k in options for k in ("servers", "gpus", "hierarchy"))):
            return None
        return learn_servers(group)      # collective: the same branch on every rank (same arguments)

    @property
    def pattern(self) -> CollectivePattern:
        """The pattern the next call runs."""
        return self.rc.pattern

    @property
    def changes(self) -> list:
        """The pattern changes applied so far (:class:`~reactccl.runtime.rtuner.Announcement`)."""
        return self.tuner.changes if self.tuner else []

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        """AllReduce ``tensor`` in place as one epoch; returns it."""
        return self.run(tensor, end_epoch=True)

    def run(self, tensor: torch.Tensor, end_epoch: bool = True) -> torch.Tensor:
        """AllReduce ``tensor`` in place; ``end_epoch=False`` keeps the epoch open for more
        calls (the gradient buckets of one training step form one epoch).

        Raises:
            FlowTimeoutError: a flow timed out or the transport failed (a dead peer's
                ``Connection closed by peer`` included); every later call raises it too,
                naming the epoch where the group broke, without touching the group.
            MismatchError: ranks called with different sizes/dtypes/patterns.
        """
        self._group.run(lambda: self._run(tensor), self.epoch)  # a transport error -> FlowTimeoutError
        if self.tuner is not None:      # only the tuner reads the records
            self._records.append(self.rc.last_record)
        if self.average:
            if not tensor.is_floating_point():
                raise TypeError(f"average=True needs a floating tensor, got {tensor.dtype}")
            tensor.div_(self.world)
        if end_epoch:
            if self.tuner is not None:
                self.tuner.after_epoch(self.epoch, self._records)
            self._records = []
            self.epoch += 1
        return tensor

    def _run(self, tensor: torch.Tensor) -> None:
        if not self._records and self.tuner is not None:
            self.tuner.before_epoch(self.epoch)
        self.rc(tensor, epoch=self.epoch)

    def close(self) -> None:
        """Stop the tuner thread and the waiter threads and destroy the control group (idempotent);
        also the DDP hook's bucket thread, after the buckets it holds."""
        worker = getattr(self, "_bucket_worker", None)
        if worker is not None:
            worker.stop()
        self._finalizer()


class _TraceWriter:
    """The leader's traces of every call (the RTuner hands them over) and, at close, the file."""

    def __init__(self, path: str, controller) -> None:
        self.path, self.controller = path, controller
        self.traces: list = []

    def write(self) -> None:
        from ..tracefile import TraceRun, write_chrome_trace
        decisions = list(getattr(self.controller, "decisions", None) or [])
        try:
            n = write_chrome_trace(self.path, [TraceRun.on_clock("", self.traces, decisions)],
                                   metadata={"command": "reactccl.torch.ReactAllReduce"})
        except (OSError, ValueError) as e:      # at close or interpreter exit: say it, do not raise
            log.warning("ReactAllReduce: trace %s not written: %s", self.path, e)
            return
        log.info("ReactAllReduce: wrote %s (%d trace events)", self.path, n)


def _shutdown(tuner: RTuner | None, rc: RCollective, writer: _TraceWriter | None = None) -> None:
    if tuner is not None:
        tuner.close()
    if writer is not None:
        writer.write()
    rc.close()

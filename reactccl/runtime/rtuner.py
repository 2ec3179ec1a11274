"""RTuner: REACT's control plane on a separate CPU thread per rank, over its own Gloo group.

Every rank runs a tuner thread. Every ``every`` epochs (a round; default 1)
the workers send the timing records of those epochs to the leader
(``gather``), the leader joins them into one :class:`~reactccl.trace.EpochTrace`
per epoch, feeds them to the REACT controller in epoch order (the controller
keeps its own batches of B epochs, REACT §5.4), and broadcasts an
announcement: "keep", or "pattern version v from epoch E on". E is the
decision's ``effective_epoch`` (REACT's controller sets it to e + 1 + ``apply_delay`` for a
decision on epoch e, ``apply_delay`` = 5 epochs by default, §6.3), or else the round's deadline.
Training goes on with the old pattern meanwhile and never waits for it.

Agreement: round k's deadline is ``(k+1)*every + delay``. Before a rank
starts epoch e it makes sure every round whose deadline is <= e has been
announced (normally long done; it waits, bounded by ``timeout``, only if the
control plane is more than ``delay`` epochs late), then switches to a
pattern announced for epoch e. The leader refuses (and freezes tuning) any
decision whose E is earlier than its round's deadline, since a rank might
already have passed E. So a rank never runs a pattern the others are not
running.

Faults: if the leader's controller raises, or decides on a pattern that does not fit
the job (another rank count or collective: checked before announcing, since every
rank's ``set_pattern`` would refuse it), the leader announces "frozen" and
every rank keeps the last agreed pattern, with a logged warning. A rank whose records
cannot be sent (too large, not JSON, a frame of the wrong size) sends an error frame
instead (:mod:`.wire`), so the leader announces "frozen" naming it at once. An announced
pattern is parsed, verified and fitted to the group (rank count, collective, an epoch not
before the round's deadline) on *every* rank before it is used, and the ranks then vote
(one small all-gather, on change rounds only): if any rank refuses it, every rank freezes on
the last agreed pattern with that rank's reason, so no rank runs a pattern another refused.
If the
control plane itself fails on a rank (a peer died or stalled past
``timeout``), that rank freezes on its current pattern and warns; the data
plane (RCollective's timeouts) then reports the dead peer. Two ranks
can only disagree if an announcement reached some ranks and not others
(the leader died mid-broadcast); RCollective's agreement check on the
changed pattern then fails with an error instead of computing garbage.
A failure while the job is ending (``close()`` began, the process group was
destroyed, the interpreter is exiting) is not a fault: the thread stops quietly.

Wire format: plain data only (:mod:`.wire`: JSON bytes in uint8 tensors over the
control group). Workers send their records as JSON (:func:`.records.record_to_wire`),
the leader checks every field before use (:func:`.records.record_from_wire`) and
announces ``{"kind": "keep" | "frozen" | "change", ...}`` with the new pattern as
``reactccl.pattern/1`` JSON, which every rank loads and verifies. The ranks check when the
control group is made that they frame messages alike (:attr:`RTuner.frame_bytes`): a frame of
another size would abort the Gloo receiver's process. Nothing is unpickled,
so a process that reaches the rendezvous or a Gloo port cannot make the leader run code.
Listening addresses: see :mod:`.listen` (the control group's Gloo pairs use
``control_ifname``, by default the interface towards ``MASTER_ADDR``).

Controller protocol (:class:`reactccl.contract.Controller`, e.g. ``reactccl.tuner.ReactController``;
only ``observe`` is used here): ``observe(trace: EpochTrace) -> decision | None``, where a decision is a
:class:`CollectivePattern` or has one in ``.pattern`` (and optionally
``.effective_epoch``); it is called once per epoch, in order, on the leader only.

Source: REACT §5.4 (feedback loop), §6.2 (RTuner), §6.3 (5-epoch delay, own interface).
"""

from __future__ import annotations

import datetime
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch.distributed as dist

from ..contract import Controller
from ..errors import ReactcclError
from ..pattern import CollectivePattern, dumps, loads, verify
from ..pattern.types import excerpt
from ..trace import EpochTrace
from . import wire
from .listen import control_interface
from .rcollective import RCollective, pattern_digest
from .records import LocalRecord, assemble_trace, merge_traces, record_from_wire, record_to_wire
from .wire import MessageError, all_gather_json, broadcast_json, gather_json

__all__ = ["RTuner", "ControlPlaneError", "Announcement"]

log = logging.getLogger("reactccl.runtime")
_IFNAME_LOCK = threading.Lock()
_STOP = object()


class ControlPlaneError(ReactcclError, RuntimeError):
    """The control plane could not agree on the pattern in time."""


@dataclass(frozen=True)
class Announcement:
    """The leader's word after round ``round``: run ``pattern`` (version ``version``) from
    epoch ``epoch`` on, or keep the current one (``pattern is None``); ``frozen`` gives the
    reason when the leader stopped tuning."""

    round: int
    version: int
    epoch: int
    pattern: CollectivePattern | None = None
    frozen: str = ""


class RTuner:
    """REACT's runtime tuner for one :class:`RCollective` (create it on every rank, in the same order).

    Args:
        rc: the collective whose pattern is tuned.
        controller: the REACT controller (used on the leader only; may be None elsewhere).
        leader: rank (in ``rc.group``) of the leader; 0 by default.
        every: epochs per control-plane round (1: the records of each epoch go to the
            leader right after it; REACT's batch B is the controller's own setting).
        delay: epochs between the end of a round and its deadline. A controller that makes a
            decision on epoch e effective at e + 1 + ``apply_delay`` (REACT's, §6.3) needs
            ``delay <= apply_delay + 1 - every``, else a decision on a round's first epoch is
            refused (and tuning frozen); :class:`reactccl.torch.ReactAllReduce` sets that.
        timeout: seconds for each control-plane exchange and for the training thread's
            bounded wait on a late announcement.
        control_ifname: network interface the control group's Gloo pairs listen on (sets
            ``GLOO_SOCKET_IFNAME`` while the group is created). None (default):
            :func:`reactccl.runtime.listen.control_interface`, i.e. ``GLOO_SOCKET_IFNAME``
            if set, else the interface towards ``MASTER_ADDR`` (``lo`` on one machine);
            ``""``: torch's own choice (the host name's address).

    Raises:
        ValueError: bad every/delay/leader, no controller on the leader, or ranks that were given
            different every/delay/leader or frame their control messages differently (checked over
            the control group when it is created: every rank raises).
    """

    def __init__(self, rc: RCollective, controller: Controller | None = None, leader: int = 0, every: int = 1, delay: int = 5,
                 timeout: float = 60.0, control_ifname: str | None = None) -> None:
        if every < 1 or delay < 0:
            raise ValueError(f"every must be >= 1 and delay >= 0, got every={every}, delay={delay}")
        if not 0 <= leader < rc.world:
            raise ValueError(f"leader: rank {leader} is not in the group of {rc.world}")
        self.rc, self.leader, self.every, self.delay = rc, leader, every, delay
        self.timeout = float(timeout)
        self.is_leader = rc.rank == leader
        if self.is_leader and controller is None:
            raise ValueError("the leader needs a controller")
        self.controller = controller
        ranks = [dist.get_global_rank(rc.group, r) if rc.group is not None else r for r in range(rc.world)]
        if control_ifname is None:
            control_ifname = control_interface()
        self.control_ifname = control_ifname or None
        with _IFNAME_LOCK:
            old = os.environ.get("GLOO_SOCKET_IFNAME")
            if control_ifname:
                os.environ["GLOO_SOCKET_IFNAME"] = control_ifname
            try:
                self.group = dist.new_group(ranks, backend="gloo", timeout=datetime.timedelta(seconds=timeout))
            finally:
                if control_ifname:
                    if old is None:
                        os.environ.pop("GLOO_SOCKET_IFNAME", None)
                    else:
                        os.environ["GLOO_SOCKET_IFNAME"] = old
        self._leader_global = ranks[leader]
        self.frame_bytes = int(wire.INLINE_BYTES)   # this rank's frame size: the ranks must agree on it
        settings = [tuple(x) if isinstance(x, list) else (x,) for x in
                    all_gather_json([every, delay, leader, self.frame_bytes], group=self.group)]
        if any(x[:3] != settings[0][:3] for x in settings):
            dist.destroy_process_group(self.group)
            raise ValueError(f"RTuner: the ranks disagree on (every, delay, leader): "
                             f"{ {r: x[:3] for r, x in enumerate(settings)} }; give every rank the same "
                             "(with ReactAllReduce, the same params: its apply_delay sets every and delay)")
        if any(x[3:] != settings[0][3:] for x in settings):
            dist.destroy_process_group(self.group)   # a frame of another size would abort its receiver
            raise ValueError(f"RTuner: the ranks disagree on the control-plane frame size (bytes): "
                             f"{ {r: x[3] if len(x) > 3 else None for r, x in enumerate(settings)} }; "
                             "run the same reactccl version on every rank")
        rc.sync_clock(self.group)
        self.version = 0
        self.frozen = ""
        #: leader: called with every call's assembled trace, on the tuner thread (``--trace`` files)
        self.on_trace: Callable[[EpochTrace], None] | None = None
        self.changes: list[Announcement] = []
        self._known = {rc.digest: rc.pattern}
        self._latest = rc.pattern  # the last announced pattern (tuner thread only)
        self._sent: tuple[str, CollectivePattern] | None = None   # leader: the change it announced, verified
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._announced: dict[int, Announcement] = {}
        self._awaited = 0                                  # next round the training thread must see
        self._schedule: dict[int, Announcement] = {}       # epoch -> change (training thread only)
        self._cv = threading.Condition()
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name=f"rtuner-{rc.rank}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------ training thread
    def deadline(self, round_: int) -> int:
        """The first epoch before which every rank knows round ``round_``'s announcement."""
        return (round_ + 1) * self.every + self.delay

    def before_epoch(self, epoch: int) -> CollectivePattern:
        """Call before running epoch ``epoch``: switches ``rc`` to the pattern agreed for it and returns it."""
        while self.deadline(self._awaited) <= epoch:
            ann = self._wait_round(self._awaited)
            if ann is not None and ann.pattern is not None:
                self._schedule[ann.epoch] = ann
            self._awaited += 1
        ann = self._schedule.pop(epoch, None)
        if ann is not None:
            self.rc.set_pattern(ann.pattern)
            self.changes.append(ann)
            log.info("rank %d: epoch %d runs pattern version %d", self.rc.rank, epoch, ann.version)
        return self.rc.pattern

    def after_epoch(self, epoch: int, records: list[LocalRecord]) -> None:
        """Hand epoch ``epoch``'s records (one per call of the collective) to the tuner thread."""
        self._inbox.put((epoch, records))

    def close(self, timeout: float | None = None) -> None:
        """Stop the tuner thread (a round in progress finishes or times out), then destroy the
        control group. Idempotent; a control-plane failure after this began is not reported.

        ``timeout`` (default: the control-plane ``timeout``, which also bounds every exchange)
        is how long to wait for the thread. The group is destroyed only once the thread has
        ended: destroying it under a thread still inside a Gloo exchange aborts the process
        (std::terminate), which a loaded machine showed with the old 5 s wait."""
        self._closing = True
        self._inbox.put(_STOP)
        self._thread.join(self.timeout if timeout is None else timeout)
        if not self._thread.is_alive() and self._group_alive():
            try:
                dist.destroy_process_group(self.group)
            except Exception as e:  # noqa: BLE001 - shutting down; nothing left to protect
                log.debug("rank %d: destroying the control group failed: %r", self.rc.rank, e)

    def _group_alive(self) -> bool:
        """Whether the control group still exists (torch.distributed initialised and the group
        not destroyed, e.g. by ``dist.destroy_process_group()`` at the end of a job)."""
        if not dist.is_initialized():
            return False
        try:
            dist.get_process_group_ranks(self.group)
        except Exception:  # noqa: BLE001 - KeyError/ValueError/RuntimeError across torch versions
            return False
        return True

    def _shutting_down(self, grace: float = 1.0) -> bool:
        """After a control-plane error: whether the job is ending rather than failing (close()
        began, the group or torch.distributed is gone, or the interpreter is exiting), waiting
        up to ``grace`` seconds for that to show (a peer that destroyed its group first makes
        our exchange fail a moment before our own training thread gets there)."""
        end = time.monotonic() + grace
        while True:
            if self._closing or sys.is_finalizing() or not self._group_alive():
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(0.05)

    def _wait_round(self, k: int) -> Announcement | None:
        if self.frozen and k not in self._announced:
            return None
        with self._cv:
            ok = self._cv.wait_for(lambda: k in self._announced or bool(self.frozen), timeout=self.timeout)
            if not ok:
                self._freeze(f"no announcement for round {k} within {self.timeout:g} s")
            return self._announced.pop(k, None)

    def _freeze(self, why: str) -> None:
        if not self.frozen:
            self.frozen = why
            log.warning("rank %d: REACT tuning stopped (%s); the job keeps running on the last agreed pattern "
                        "(digest %x)", self.rc.rank, why, self.rc.digest)

    # ---------------------------------------------------------- tuner thread
    def _loop(self) -> None:
        k = 0
        try:
            while True:
                batch = []
                while len(batch) < self.every:
                    item = self._inbox.get()
                    if item is _STOP:
                        return
                    batch.append(item)
                ann = self._round(k, batch)
                with self._cv:
                    if ann.frozen:
                        self._freeze(ann.frozen)
                    else:
                        self._announced[k] = ann
                    self._cv.notify_all()
                if ann.frozen:
                    return
                k += 1
        except Exception as e:  # noqa: BLE001 - a control-plane failure must not stop training
            if self._shutting_down():
                log.debug("rank %d: control plane stopped in round %d at shutdown: %s", self.rc.rank, k, e)
                with self._cv:
                    self.frozen = self.frozen or f"stopped at shutdown in round {k}"
                    self._cv.notify_all()
                return
            with self._cv:
                self._freeze(f"control plane failed in round {k}: {e}")
                self._cv.notify_all()

    def _round(self, k: int, batch: list) -> Announcement:
        wire_batch = [[int(epoch), [record_to_wire(r) for r in recs]] for epoch, recs in batch]
        try:
            got, unreadable = gather_json(wire_batch, dst=self._leader_global, group=self.group,
                                          frame_bytes=self.frame_bytes), None
        except MessageError as e:
            # leader: a rank's message is unreadable or came as an error frame, so it says so;
            # a worker whose own message could not be sent hears the leader's "frozen" below
            got, unreadable = None, e
        msg = None
        if self.is_leader:
            try:
                if unreadable is not None:
                    raise unreadable
                msg = self._decide(k, got)
            except Exception as e:  # noqa: BLE001 - the leader's failure is announced, not fatal
                log.warning("REACT leader failed in round %d (controller, trace assembly, or a decision "
                            "that does not fit the job): %r", k, e)
                msg = {"kind": "frozen", "why": f"leader failed in round {k}: {e!r}"}
        msg = broadcast_json(msg, src=self._leader_global, group=self.group, frame_bytes=self.frame_bytes)
        kind = msg.get("kind") if isinstance(msg, dict) else None
        if kind == "frozen":
            return Announcement(k, self.version, self.deadline(k), None, str(msg.get("why", "")))
        if kind == "keep":
            return Announcement(k, self.version, self.deadline(k))
        if kind != "change" or not all(isinstance(msg.get(f), t) for f, t in
                                       (("version", int), ("epoch", int), ("pattern", str))):
            raise ControlPlaneError(f"round {k}: the leader's announcement is not one this version knows: "
                                    f"{str(msg)[:200]}")
        version, epoch, text = msg["version"], msg["epoch"], msg["pattern"]
        pattern, why = self._accept(k, epoch, text)
        # every rank says whether it can run the pattern; one that cannot stops the change on all
        votes = all_gather_json(why, group=self.group, max_bytes=4096)
        refused = [(r, v) for r, v in enumerate(votes) if not isinstance(v, str) or v]
        if refused:
            r, v = refused[0]
            return Announcement(k, self.version, self.deadline(k), None,
                                f"round {k}: rank {r} refused the announced pattern version {version}: "
                                f"{v if isinstance(v, str) else 'a malformed vote'}; the last agreed pattern is kept")
        self.version = version
        self._latest = pattern
        self._known[pattern_digest(pattern)] = pattern
        return Announcement(k, version, epoch, pattern)

    def _accept(self, k: int, epoch: int, text: str) -> tuple[CollectivePattern | None, str]:
        """An announced pattern, parsed, verified and fitted to this rank's group, or None and
        the reason it cannot run here (an excerpt, for the vote). The leader reuses the pattern
        it verified before announcing it."""
        try:
            if epoch < self.deadline(k):
                raise ControlPlaneError(f"it takes effect at epoch {epoch}, before round {k}'s deadline "
                                        f"{self.deadline(k)}, which some rank may have passed")
            sent, self._sent = self._sent, None
            if sent is not None and sent[0] == text:
                pattern = sent[1]
            else:
                pattern = loads(text)
                verify(pattern)
            self._check_fits(pattern, "the announced pattern")
        except (ValueError, MemoryError, ControlPlaneError) as e:    # PatternError, VerificationError too
            return None, excerpt(f"{type(e).__name__}: {e}", 300, quote=False)
        return pattern, ""

    def _decide(self, k: int, got: list) -> dict:
        """Leader: records of the batch (plain data, checked) -> traces -> controller -> the
        announcement message (plain data). A decision that does not fit the job (another rank
        count or collective, or not a pattern) raises, like a failing controller."""
        decision = None
        got = self._parse_batches(k, got)
        for i in range(self.every):
            epoch = got[0][i][0]
            per_rank = [got[r][i][1] for r in range(self.rc.world)]
            calls = len(per_rank[0])
            if any(len(x) != calls for x in per_rank):
                raise ControlPlaneError(f"epoch {epoch}: ranks ran different numbers of calls "
                                        f"{[len(x) for x in per_rank]}")
            traces = []
            for j in range(calls):
                recs = [x[j] for x in per_rank]
                known = self._known.get(recs[0].digest)
                if known is None:
                    raise ControlPlaneError(f"epoch {epoch}: rank 0 ran a pattern (digest {recs[0].digest:x}) "
                                            "that was never announced")
                traces.append(assemble_trace(known, recs))
            if self.on_trace is not None:
                for t in traces:
                    self.on_trace(t)
            if traces:
                d = self.controller.observe(merge_traces(traces))
                if d is not None:
                    decision = d
        if decision is None:
            return {"kind": "keep"}
        pattern = decision if isinstance(decision, CollectivePattern) else getattr(decision, "pattern", None)
        self._check_fits(pattern)
        if pattern_digest(pattern) == pattern_digest(self._latest):
            return {"kind": "keep"}
        epoch = getattr(decision, "effective_epoch", None)
        epoch = self.deadline(k) if epoch is None else int(epoch)
        if epoch < self.deadline(k):
            raise ControlPlaneError(f"the controller wants the new pattern from epoch {epoch}, but ranks only "
                                    f"learn of round {k} by epoch {self.deadline(k)} (every={self.every}, "
                                    f"delay={self.delay}); give the RTuner a delay <= the controller's "
                                    "apply_delay + 1 - every")
        verify(pattern)
        text = dumps(pattern)
        self._sent = (text, pattern)
        return {"kind": "change", "version": self.version + 1, "epoch": epoch, "pattern": text}

    def _check_fits(self, pattern, what: str = "the controller's pattern") -> None:
        """ControlPlaneError unless ``pattern`` could replace the job's pattern on every rank
        (what :meth:`RCollective.set_pattern` would refuse there): checked by the leader before
        announcing, and by every rank on what it was announced."""
        tail = "; not announced" if what == "the controller's pattern" else ""
        if not isinstance(pattern, CollectivePattern):
            raise ControlPlaneError(f"the controller's decision carries no CollectivePattern "
                                    f"(got {type(pattern).__name__})")
        if pattern.num_ranks != self.rc.world:
            raise ControlPlaneError(f"{what} {pattern.name or ''} has {pattern.num_ranks} ranks, "
                                    f"the job has {self.rc.world}{tail}")
        if pattern.collective != self.rc.pattern.collective:
            raise ControlPlaneError(f"{what} computes {pattern.collective.value}, the job runs "
                                    f"{self.rc.pattern.collective.value}{tail}")

    def _parse_batches(self, k: int, got: list) -> list:
        """The gathered plain data as ``[[(epoch, [LocalRecord, ...]), ...] per rank]``, each
        record checked (:func:`record_from_wire`); ValueError naming the rank otherwise."""
        out = []
        for r, batch in enumerate(got):
            if not isinstance(batch, list) or len(batch) != self.every:
                raise ControlPlaneError(f"round {k}: rank {r} sent {type(batch).__name__} instead of "
                                        f"{self.every} epochs of records")
            items = []
            for item in batch:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int)
                        and isinstance(item[1], list)):
                    raise ControlPlaneError(f"round {k}: rank {r} sent a malformed epoch entry")
                try:
                    items.append((item[0], [record_from_wire(x) for x in item[1]]))
                except ValueError as e:
                    raise ControlPlaneError(f"round {k}: rank {r}'s records: {e}") from None
                if any(rec.rank != r for rec in items[-1][1]):
                    raise ControlPlaneError(f"round {k}: rank {r} sent records of another rank")
            out.append(items)
        return out

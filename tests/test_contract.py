"""The executor/controller contract and its one loop (reactccl.contract), on the NIC-sharing model."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.contract import (
    SETTLED_FOREVER,
    Controller,
    Drive,
    Executor,
    StaticController,
    drive,
    drive_jobs,
    settled_through,
    tell_ahead,
)
from reactccl.tuner import ReactController
from reactccl.tuner.synthetic import SyntheticExecutor

S = 20e6        # bytes
# ring AllReduce on 4 ranks: 6 steps, each flow 1/4 of S at 100 Gb/s (one flow per NIC) plus 1 µs,
# one after the other along the ring's dependency chain
RING4 = 6 * (1e-6 + S / 4 * 8 / 100e9)


class Switch:
    """Runs ``a`` before epoch ``at`` and ``b`` from it on; settles one epoch past what it has seen."""

    def __init__(self, a, b, at):
        self.a, self.b, self.at, self.seen = a, b, at, 0

    def pattern_for_epoch(self, epoch):
        return self.a if epoch < self.at else self.b

    def observe(self, trace):
        assert trace.pattern is self.pattern_for_epoch(self.seen)
        self.seen += 1

    @property
    def settled_through(self):
        return self.seen + 1


class Ahead(SyntheticExecutor):
    """The NIC model with a lookahead of 2 that records what it is told."""

    lookahead = 2

    def __init__(self):
        super().__init__(S)
        self.told = []

    def expect(self, epoch, pattern):
        self.told.append((epoch, pattern.name))


def test_static_drive_records_the_model_epoch_times():
    ring = generate("ring", 4)
    done = drive(SyntheticExecutor(S), StaticController(ring), 3)
    assert done.epoch == 3 and done.durations.shape == (3, 1)
    np.testing.assert_allclose(done.durations[:, 0], RING4, rtol=1e-12)
    np.testing.assert_allclose(done.algbw[:, 0], S / RING4, rtol=1e-12)
    np.testing.assert_allclose(done.busbw[:, 0], S / RING4 * 2 * 3 / 4, rtol=1e-12)
    assert done.changes == [0] and done.first == [ring] and done.current == [ring]


def test_the_loop_tells_ahead_counts_changes_and_calls_back():
    ring, tree = generate("ring", 4), generate("nccl-tree", 4)
    ex, seen = Ahead(), []
    done = drive(ex, Switch(ring, tree, 2), 4, on_epoch=lambda e, trs: seen.append((e, trs[0].pattern.name)))
    assert seen == [(0, ring.name), (1, ring.name), (2, tree.name), (3, tree.name)]
    assert done.changes == [1]
    # before epoch e the controller has seen e epochs and settles e + 1: one epoch told each time,
    # none past the run's last epoch (3)
    assert ex.told == [(1, ring.name), (2, tree.name), (3, tree.name)]


def test_tell_ahead_without_settled_through_tells_nothing_and_static_settles_all():
    class Bare:
        def pattern_for_epoch(self, e):
            return "p"

        def observe(self, trace):
            pass

    assert settled_through(Bare(), 7) == 7
    assert settled_through(StaticController(None), 7) == SETTLED_FOREVER
    ex = Ahead()
    assert tell_ahead(ex, lambda e: generate("ring", 4), 3, settled_through(Bare(), 3), 10) == 0
    assert tell_ahead(ex, lambda e: generate("ring", 4), 3, SETTLED_FOREVER, 10) == 2 and len(ex.told) == 2


def test_several_jobs_step_together_and_each_controller_sees_its_own_trace():
    ring, tree = generate("ring", 4), generate("nccl-tree", 4)
    ex = SyntheticExecutor(S)
    a, b = Switch(ring, ring, 99), Switch(tree, ring, 1)
    done = drive_jobs(lambda pats: [ex.run_epoch(p) for p in pats], [a, b], 3)
    assert a.seen == b.seen == 3 and done.changes == [0, 1]
    np.testing.assert_allclose(done.durations[:, 0], RING4, rtol=1e-12)
    np.testing.assert_allclose(done.durations[1:, 1], RING4, rtol=1e-12)


def test_react_controller_and_executors_fit_the_protocols():
    ring = generate("ring", 4)
    assert isinstance(ReactController(ring), Controller) and isinstance(StaticController(ring), Controller)
    assert isinstance(SyntheticExecutor(S), Executor)


def test_bad_drives_are_refused_with_the_reason():
    ring = generate("ring", 4)
    ex, ctl = SyntheticExecutor(S), StaticController(ring)
    with pytest.raises(ValueError, match="epochs"):
        drive(ex, ctl, 0)
    with pytest.raises(TypeError, match="run_epoch"):
        drive(object(), ctl, 2)
    with pytest.raises(TypeError, match="controller 0"):
        drive(ex, object(), 2)
    with pytest.raises(ValueError, match="one job"):
        Drive([ctl, ctl], 2, executor=ex)
    with pytest.raises(ValueError, match="exactly one"):
        Drive([ctl], 2)
    with pytest.raises(ValueError, match="1 traces for 2 jobs at epoch 0"):
        drive_jobs(lambda pats: [ex.run_epoch(pats[0])], [ctl, ctl], 2)
    d = drive(ex, ctl, 1)
    with pytest.raises(RuntimeError, match="all 1 epochs have run"):
        d.step()

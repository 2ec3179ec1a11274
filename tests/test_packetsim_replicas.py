"""ReplicaCluster: epochs on several executor replicas, ahead on the patterns a driver expects (else the same one).

The replicated executor here is the fluid simulator with long-lived background only, whose epoch
is a function of (pattern, epoch index): a run on replicas must then equal the run on one
executor exactly, whatever was speculated and dropped.
"""

from __future__ import annotations

import os
from functools import partial

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import SimulatedCluster
from reactccl.packetsim import PacketSimError, ReplicaCluster
from reactccl.topology import parse_topology
from reactccl.tuner import ReactParams
from reactccl.tuner.run import run_react


def fluid(index: int, *, bg=("into:3:p=2",)) -> SimulatedCluster:
    return SimulatedCluster(parse_topology("star:hosts=16"), np.arange(8), 20e6, background=list(bg), seed=1)


def broken(index: int):
    if index == 1:
        raise ValueError("replica 1 cannot be built: bad topology")
    return fluid(index)


class Dies:
    def run_epoch(self, pattern):
        os._exit(3)


def dies(index: int):
    return Dies()


def test_react_on_replicas_equals_react_on_one_executor():
    p = generate("nccl-tree", 8)
    params = ReactParams(seed=1, estimator="closed")   # 2+ pattern changes in 40 epochs here
    one = run_react(fluid(0), p, 40, params)
    with ReplicaCluster(fluid, replicas=2) as rc:
        two = run_react(rc, p, 40, params)
        used, dropped = sum(rc.used), sum(rc.dropped)
    assert len(one.decisions) >= 2                      # the pattern changed
    np.testing.assert_array_equal(one.durations, two.durations)
    assert [d.epoch for d in one.decisions] == [d.epoch for d in two.decisions]
    assert used == 40
    # run_react told the copies the settled patterns ahead (reactccl.contract): nothing was dropped
    assert dropped == 0


def test_without_expect_the_copies_guess_and_drop():
    p = generate("nccl-tree", 8)
    params = ReactParams(seed=1, estimator="closed")
    from reactccl.tuner import ReactController
    ctrl = ReactController(p, params)
    with ReplicaCluster(fluid, replicas=2) as rc:
        for e in range(40):
            ctrl.observe(rc.run_epoch(ctrl.pattern_for_epoch(e)))
        dropped = sum(rc.dropped)
    assert 1 <= dropped <= len(ctrl.decisions) + 1     # a speculation on the old pattern at each change


def test_tell_ahead_stops_at_the_settled_epoch_and_the_run_end():
    from reactccl.contract import tell_ahead

    class Ahead:
        lookahead = 3

        def __init__(self):
            self.told = []

        def expect(self, epoch, pattern):
            self.told.append((epoch, pattern))

    ex = Ahead()
    assert tell_ahead(ex, lambda e: f"p{e}", 10, 12, 100) == 2         # 11, 12: 13 is not settled
    assert ex.told == [(11, "p11"), (12, "p12")]
    assert tell_ahead(ex, lambda e: "q", 10, 50, 13) == 2              # 11, 12: the run has 13 epochs
    assert tell_ahead(object(), lambda e: "q", 0, 50, 100) == 0        # no expect: nothing told


def test_assignment_depends_on_requests_only():
    p, q = generate("nccl-tree", 8), generate("ring", 8)
    seq = [p, p, p, q, q, p, p, p]
    runs = []
    for _ in range(2):
        with ReplicaCluster(fluid, replicas=2) as rc:
            traces = [rc.run_epoch(x) for x in seq]
            runs.append((rc.used, rc.dropped, [t.epoch for t in traces], [t.duration for t in traces]))
    assert runs[0] == runs[1]
    assert runs[0][2] == list(range(len(seq)))
    # epochs 3 and 5 change the pattern: the run speculated for them on the old pattern is dropped
    assert sum(runs[0][1]) == 2


def test_factory_error_is_raised_with_its_message():
    with ReplicaCluster(broken, replicas=2) as rc:
        with pytest.raises(ValueError, match="replica 1 cannot be built"):
            for _ in range(3):
                rc.run_epoch(generate("ring", 8))


def test_dead_replica_is_named():
    with ReplicaCluster(dies, replicas=1) as rc:
        with pytest.raises(PacketSimError, match="replica 0 died while running epoch 0"):
            rc.run_epoch(generate("ring", 8))


@pytest.mark.parametrize("kw, msg", [(dict(replicas=0), "replicas"), (dict(replicas=True), "replicas"),
                                     (dict(timeout=0), "timeout")])
def test_bad_arguments(kw, msg):
    with pytest.raises(ValueError, match=msg):
        ReplicaCluster(partial(fluid), **kw)


@pytest.mark.slow
@pytest.mark.skipif(not __import__("reactccl.packetsim", fromlist=["available"]).available(),
                    reason="ns-3 not installed (pip install 'reactccl[ns3]')")
def test_packet_replicas_run_epochs_by_global_index():
    from reactccl.packetsim import packet_replicas
    from reactccl.topology import star

    p = generate("ring", 4)
    with packet_replicas(2, star(4), [0, 1, 2, 3], 1e6, transport="default") as rc:
        traces = [rc.run_epoch(p) for _ in range(3)]
        used = rc.used
    assert [t.epoch for t in traces] == [0, 1, 2]
    assert used == [2, 1]                       # epochs 0 and 2 on replica 0, epoch 1 on replica 1
    # every epoch is a whole ring on its replica: 12 flows delivered, each after its start
    for t in traces:
        assert t.meta["engine"] == "packet" and np.all(t.end > t.start)
        # 1 MB ring on 4 hosts at the star's rate: at least the alpha-beta bound of 6 steps of 250 kB
        assert t.duration > 6 * 250e3 * 8 / float(star(4).capacity.max())


def test_closed_cluster_refuses_epochs_and_reads_background_back():
    rc = ReplicaCluster(fluid, replicas=1)
    rc.run_epoch(generate("ring", 8))
    ref = fluid(0)
    ref.run_epoch(generate("ring", 8))
    assert len(ref.network.long_lived) == 2                  # into:3:p=2: two flows into rank 3's host
    assert rc.network.long_lived == ref.network.long_lived
    rc.close()
    with pytest.raises(PacketSimError, match="closed; cannot run epoch 1"):
        rc.run_epoch(generate("ring", 8))

"""REACT detection (§5.2), critical paths and the FCT estimator (§5.4.1) on hand-built traces."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.pattern import PatternBuilder
from reactccl.trace import EpochTrace
from reactccl.tuner import FctModel, ReactParams, critical_path, detect_congestion, path_time
from reactccl.tuner.paths import schedule


def _trace(pattern, fct, epoch=0, S=1e6):
    nbytes = pattern.flow_bytes(S)
    fct = np.asarray(fct, dtype=float)
    return EpochTrace(epoch, pattern, S, np.zeros_like(fct), fct, nbytes, float(fct.max()))


def _chain():
    # 3 ranks, one chunk: 0->1 (+), 1->2 (+), then 2 copies the sum to 1 and 0
    b = PatternBuilder("allreduce", 3, name="chain")
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 1, [c])
    b.flow(1, 1, 2, [c])
    b.flow(2, 2, 1, [c], "copy")
    b.flow(2, 2, 0, [c], "copy")
    return b.build()


def test_steady_and_erratic_flows_found_from_fcts_only():
    p = generate("ring", 4)                      # every flow has degree 1, carries S/4
    F = p.num_flows
    traces = []
    for e in range(6):
        fct = np.full(F, 1e-3)
        fct[0] = 2e-3                            # half throughput in every epoch: steady
        fct[5] = 1.2e-3 if e % 2 == 0 else 1.8e-3  # throughput T/1.2, T/1.8 alternating: nstd 0.2
        traces.append(_trace(p, fct, e))
    c = detect_congestion(p, traces, 0.2, 0.15)
    T = 0.25e6 * 8 / 1e-3                        # 2 Gbit/s
    assert c.mean[1] == pytest.approx(T)
    # class mean: 22 flows at T, flow 0 at T/2, flow 5 at (T/1.2 + T/1.8)/2
    assert c.degree_mean[0] == pytest.approx((22 * T + T / 2 + (T / 1.2 + T / 1.8) / 2) / 24)
    assert c.nstd[5] == pytest.approx((T / 1.2 - T / 1.8) / 2 / ((T / 1.2 + T / 1.8) / 2))   # 0.2
    assert c.noise == 0.0                        # the median flow does not vary
    assert np.flatnonzero(c.steady).tolist() == [0]
    assert np.flatnonzero(c.erratic).tolist() == [5]
    assert c.kind(0) == "steady" and c.kind(5) == "erratic" and c.kind(1) == "none"
    # flow 0 runs at 0.51 of its class mean: steady for delta1 = 0.2, not for delta1 = 0.5
    assert not detect_congestion(p, traces, 0.5, 0.15).steady[0]
    assert not detect_congestion(p, traces, 0.2, 0.25).erratic[5]


def test_degree_classes_are_compared_separately():
    p = _chain()                                  # flows 0,1 degree 1; flows 2,3 degree 2
    assert p.flow_degree().tolist() == [1, 1, 2, 2]
    tr = [_trace(p, [1e-3, 1e-3, 2e-3, 2e-3], e) for e in range(6)]
    c = detect_congestion(p, tr)
    assert not c.congested.any()                  # degree-2 flows are slower but like each other


def test_critical_path_by_hand():
    p = _chain()
    cp = critical_path(p, np.array([1.0, 2.0, 3.0, 5.0]))
    assert cp.flows.tolist() == [0, 1, 3] and cp.length == 8.0
    assert cp.nodes(p) == {(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, 0)}
    assert path_time(cp, np.array([1.0, 1.0, 1.0, 1.0])) == 3.0
    finish, pred = schedule(p, np.array([1.0, 2.0, 3.0, 5.0]))
    assert finish.tolist() == [1.0, 3.0, 6.0, 8.0] and pred.tolist() == [-1, 0, 1, 1]
    with pytest.raises(ValueError, match="weights of shape"):
        critical_path(p, np.ones(3))


def test_critical_path_of_tree_follows_the_slow_subtree():
    p = generate("nccl-tree", 8)
    w = np.ones(p.num_flows)
    slow = int(np.flatnonzero((p.step == 1) & (p.dst == 3))[0])   # 1->3 in tree 1
    w[slow] = 10.0
    cp = critical_path(p, w)
    assert slow in cp.flows.tolist()
    assert cp.length == pytest.approx(10.0 + 5.0)   # 6 steps deep, one of them takes 10


def test_estimator_by_hand():
    p = _chain()
    fct = np.array([1e-3, 2e-3, 3e-3, 5e-3])
    model = FctModel(3, [(p, fct, p.flow_bytes(1e6))])
    assert np.allclose(model.predict(p, p.flow_bytes(1e6)), fct)       # seen pairs reproduce
    q = p.relabel([1, 0, 2])                      # 1->0, 0->2 unseen; 2->0, 2->1 seen
    # unseen degree-1 pairs: median of 1e-9 and 2e-9 s/byte = 1.5e-9, but at least the cheapest
    # observed flow out of the source or into the destination (s/byte/degree: out of 1: 2e-9;
    # into 0: 5e-3/2/1e6 = 2.5e-9; out of 0: 1e-9; into 2: 2e-9): 1->0 2.5e-9, 0->2 2e-9
    assert np.allclose(model.predict(q, q.flow_bytes(1e6)), [2.5e-3, 2e-3, 5e-3, 3e-3])
    # twice the bytes, twice the time
    assert np.allclose(model.predict(p, p.flow_bytes(2e6)), 2 * fct)


def test_params_validation():
    assert ReactParams().B == 6 and ReactParams().apply_delay == 5 and ReactParams().epsilon == 0.05
    with pytest.raises(ValueError, match="ReactParams.B"):
        ReactParams(B=0)
    with pytest.raises(ValueError, match="delta1"):
        ReactParams(delta1=1.5)
    with pytest.raises(ValueError, match="H"):
        ReactParams(B=10, H=5)

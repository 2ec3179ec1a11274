"""The search's whole-pattern check, on hand-built FCTs.

All flows of nccl-tree on 8 ranks carry 10 MB (two chunk graphs, S = 20 MB); a flow of degree k
takes k x 0.8 ms (10 MB at 100 Gbps, shared k ways) unless a test slows it down.
"""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.trace import EpochTrace
from reactccl.tuner import ReactParams
from reactccl.tuner.paths import FctModel, schedule
from reactccl.tuner.search import apply_transforms
from reactccl.tuner.transforms import Placement, Transform, ViableSwaps

S = 20e6
MS = 1e-3


def _batch(p, slow):
    nb = p.flow_bytes(S)
    w = nb * 8 * p.flow_degree() / 100e9
    for f, k in slow.items():
        w[f] *= k
    fin, _ = schedule(p, w)
    return [EpochTrace(e, p, S, fin - w, fin, nb, float(fin.max())) for e in range(6)]


def _search(p, slow):
    batch = _batch(p, slow)
    model = FctModel(p.num_ranks, [(t.pattern, t.fct, t.flow_bytes) for t in batch])
    viable = ViableSwaps(0)
    exclude: set[int] = set()
    res = apply_transforms(Placement(p), batch, model, ReactParams(), 15, viable, exclude, set(),
                           np.random.default_rng(0))
    return res, viable, exclude


def _flow(p, step, src, dst):
    return int(np.flatnonzero((p.step == step) & (p.src == src) & (p.dst == dst))[0])


def test_a_swap_that_only_shortens_the_old_path_is_withheld():
    # tree 0 is 0(4(2(1 3) 6(5 7))); its root's broadcast send 0>4 (step 3) takes 3 x 0.8 ms.
    # Tree 0's chain: 1.6 + 1.6 + 0.8 + 2.4 + 1.6 + 1.6 = 9.6 ms (tree 1: 8.0 ms).
    p = generate("nccl-tree", 8)
    res, viable, exclude = _search(p, {_flow(p, 3, 0, 4): 3.0})
    assert res.explored and not res.changed and res.accepted == []
    assert res.epoch_before == pytest.approx(9.6 * MS) and res.epoch_after == pytest.approx(9.6 * MS)
    # the old critical path (through rank 2's branch) gets 1.6 ms shorter: x1.2 > 1 + eps ...
    (w,) = res.withheld
    assert w.swap.kind is Transform.POSITION and w.swap.graph == 0 and 0 in (w.swap.a, w.swap.b)
    assert w.est_before == pytest.approx(9.6 * MS) and w.est_after == pytest.approx(8.0 * MS)
    # ... but the slow pair 0>4 moves to the parallel branch (step 1), so the epoch is not faster
    q = Placement(p).apply(w.swap).pattern
    assert np.any((q.src == 0) & (q.dst == 4) & (q.step < 3))
    assert res.placement.same_as(Placement(p)) and exclude == set() and viable.snapshot() == {}


def test_a_swap_that_makes_the_whole_pattern_faster_is_kept():
    # every flow into rank 3 takes 3x: tree 1 (7(3(1(0 2) 5(4 6))))'s chain is
    # 1.6 + 4.8 + 0.8 + 2.4 + 1.6 + 1.6 = 12.8 ms, tree 0's (3 is a leaf, 2>3 at step 5) 11.2 ms.
    p = generate("nccl-tree", 8)
    res, _, _ = _search(p, {f: 3.0 for f in np.flatnonzero(p.dst == 3)})
    assert res.withheld == []
    (a,) = res.accepted
    assert (a.swap.kind, a.swap.graph, {a.swap.a, a.swap.b}, a.swap.t0, a.swap.t1) == \
        (Transform.POSITION, 1, {3, 5}, 1, 2)
    # rank 3 no longer receives 1>3 and 5>3 at step 1: tree 1 drops to 9.6 ms, tree 0 is now the longest
    assert res.epoch_before == pytest.approx(12.8 * MS) and res.epoch_after == pytest.approx(11.2 * MS)
    assert res.placement.pattern.show().splitlines()[3].strip() == "t1   2>4+[0] 6>4+[0] 1>5+[1] 3>5+[1]"

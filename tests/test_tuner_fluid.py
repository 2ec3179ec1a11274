"""The fluid estimator (reactccl.tuner.fluid) on hand-computed cases: weighted max-min sharing of
the learned links, step order, dependencies, and the star scenarios it is exact for."""

from types import SimpleNamespace

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import SimulatedCluster
from reactccl.pattern import CollectivePattern
from reactccl.topology.builders import star
from reactccl.tuner import ReactParams
from reactccl.tuner.estimate import LinkModel
from reactccl.tuner.fluid import fluid_finish
from reactccl.tuner.steepest import estimated_epoch

C = 100e9
MB = 1e6


def _model(n, ps=None, pr=None, g=None):
    return SimpleNamespace(line_rate=C, ps=np.zeros(n) if ps is None else np.asarray(ps, float),
                           pr=np.zeros(n) if pr is None else np.asarray(pr, float),
                           pair_factor=np.ones(n * n) if g is None else np.asarray(g, float))


def _pattern(n, steps, srcs, dsts, chunks, graphs=None, C_=None):
    """One chunk per flow unless ``chunks`` says otherwise (a list of chunk ids per flow)."""
    nc = C_ or (max(max(c) for c in chunks) + 1)
    ptr = np.concatenate([[0], np.cumsum([len(c) for c in chunks])])
    return CollectivePattern.from_arrays("allreduce", n, [1 / nc] * nc, graphs or [0] * nc, steps, srcs, dsts,
                                         [0] * len(steps), ptr, [x for c in chunks for x in c], check=False)


def test_weighted_share_of_a_loaded_receive_link():
    # 0->2 and 1->2 at once; rank 2's receive link carries 1 extra flow: each gets C/3
    p = _pattern(3, [0, 0], [0, 1], [2, 2], [[0], [1]], C_=3)
    fin = fluid_finish(p, _model(3, pr=[0, 0, 1]), np.array([MB, MB]))
    assert fin == pytest.approx([8 * MB / (C / 3)] * 2, rel=1e-12)
    # a fractional load takes that fraction of a share: C / (2 + 0.5) each
    fin = fluid_finish(p, _model(3, pr=[0, 0, 0.5]), np.array([MB, MB]))
    assert fin == pytest.approx([8 * MB / (C / 2.5)] * 2, rel=1e-12)


def test_capacity_a_flow_cannot_use_goes_to_the_others():
    # 0->2 and 1->2 share rank 2's receive link; rank 0's send link carries 3 extra flows, so
    # 0->2 runs at C/4 and 1->2 takes the rest, 3C/4 (the closed form's share count says C/2)
    p = _pattern(3, [0, 0], [0, 1], [2, 2], [[0], [1]], C_=3)
    fin = fluid_finish(p, _model(3, ps=[3, 0, 0]), np.array([MB, MB]))
    t1 = 8 * MB / (0.75 * C)                  # 1->2 ends first
    left = MB * 8 - t1 * C / 4                # then 0->2 is still held at C/4 by its send link
    assert fin == pytest.approx([t1 + left / (C / 4), t1], rel=1e-12)


def test_dependencies_step_order_and_pair_factor():
    # 0->1 (step 0), then 1->2 carries the same chunk (step 1: data dependency); rank 1's later
    # send 1->0 of chunk 1 (step 2, same graph) waits for its step-1 send (step order)
    p = _pattern(3, [0, 1, 2], [0, 1, 1], [1, 2, 0], [[0], [0], [1]], C_=3)
    t = 8 * MB / C
    fin = fluid_finish(p, _model(3), np.full(3, MB))
    assert fin == pytest.approx([t, 2 * t, 3 * t], rel=1e-12)
    g = np.ones(9)
    g[1 * 3 + 2] = 2.0                        # the pair 1->2 costs twice its bits
    fin = fluid_finish(p, _model(3, g=g), np.full(3, MB))
    assert fin == pytest.approx([t, 3 * t, 4 * t], rel=1e-12)


def test_zero_byte_flows_finish_at_their_start():
    p = _pattern(3, [0, 1], [0, 1], [1, 2], [[0], [0]], C_=3)
    fin = fluid_finish(p, _model(3), np.array([MB, 0.0]))
    assert fin[1] == fin[0] == pytest.approx(8 * MB / C)


def test_exact_on_a_star_with_long_lived_background():
    """The learned loads of the oracle's star scenario (2 flows into rank 3, 1 into rank 5) and
    the true line rate make the fluid estimate equal the simulator's epoch (no latency)."""
    p = generate("nccl-tree", 8)
    topo = star(16)
    cl = SimulatedCluster(topo, np.arange(8), 20e6, background=["into:3:p=2", "into:5:p=1"], seed=1)
    tr = cl.run_epoch(p)
    m = _model(8, pr=[0, 0, 0, 2, 0, 1, 0, 0])
    m.line_rate = float(topo.capacity.max())
    est = fluid_finish(p, m, tr.flow_bytes).max()
    assert est == pytest.approx(tr.duration, rel=0.02)    # latency (µs per hop) is the difference


def test_auto_picks_fluid_for_small_jobs_and_the_errors():
    assert ReactParams().estimator_for(8) == "fluid" and ReactParams().estimator_for(256) == "closed"
    assert ReactParams(estimator="closed").estimator_for(8) == "closed"
    with pytest.raises(ValueError, match="estimator"):
        ReactParams(estimator="exact")
    p = generate("ring", 4)
    m = LinkModel(4, [(p, np.zeros(p.num_flows), np.full(p.num_flows, 1e-3), p.flow_bytes(MB))])
    with pytest.raises(ValueError, match="estimator"):
        estimated_epoch(p, m, p.flow_bytes(MB), "exact")
    with pytest.raises(ValueError, match="finite"):
        fluid_finish(p, m, -p.flow_bytes(MB))


@pytest.mark.parametrize("name,n,opts", [("binomial-reduce", 16, {"root": 0}), ("nccl-tree", 8, {"slices": 4}),
                                         ("rabenseifner", 8, {}), ("bucket", 12, {"shape": (3, 4)}),
                                         ("ring-allgather", 6, {})])
def test_every_flow_finishes_after_what_it_waits_for(name, n, opts):
    p = generate(name, n, **opts)
    rng = np.random.default_rng(n)
    m = _model(n, ps=rng.uniform(0, 2, n), pr=rng.uniform(0, 2, n), g=rng.uniform(1, 1.5, n * n))
    b = p.flow_bytes(20e6)
    fin = fluid_finish(p, m, b)
    assert np.all(np.isfinite(fin))
    ptr, idx = p.dependencies()
    alone = b * 8 * m.pair_factor[p.src * n + p.dst] / C       # no flow runs faster than the line rate
    for f in range(p.num_flows):
        ready = max((fin[d] for d in idx[ptr[f]:ptr[f + 1]]), default=0.0)
        assert fin[f] >= ready + alone[f] * (1 - 1e-9)

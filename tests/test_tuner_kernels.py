"""The compiled score of the local search (reactccl.tuner.kernels) equals the numpy reference bit
for bit: step degrees, LinkModel shares, schedule, time-averaged concurrency, send groups."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.pattern.order import send_groups
from reactccl.tuner.estimate import LinkModel, mean_concurrency
from reactccl.tuner.kernels import _mean_concurrency, estimated_finish, send_group_arrays
from reactccl.tuner.steepest import estimated_epoch
from reactccl.tuner.paths import schedule
from reactccl.tuner.synthetic import SyntheticExecutor

CASES = [("nccl-tree", 8, {}), ("nccl-tree", 8, {"slices": 4}), ("nccl-tree", 13, {"slices": 3}), ("ring", 6, {}),
         ("recursive-doubling", 8, {}), ("binomial-broadcast", 8, {}), ("swing-b", 16, {}), ("bucket", 12, {"shape": (3, 4)}),
         ("rabenseifner", 8, {})]


def _model(p, rng, mode):
    slow = {int(r): float(rng.uniform(1.5, 4)) for r in rng.choice(p.num_ranks, 2, replace=False)}
    ex = SyntheticExecutor(slow_into=slow, slow_out={int(rng.integers(p.num_ranks)): 2.0}, noise=0.1,
                           seed=int(rng.integers(1 << 30)))
    obs = [ex.run_epoch(p) for _ in range(4)]
    m = LinkModel(p.num_ranks, [(o.pattern, o.start, o.end, o.flow_bytes) for o in obs])
    m.concurrency = mode
    return m


@pytest.mark.parametrize("name,n,opts", CASES)
@pytest.mark.parametrize("mode", ["time", "step"])
def test_compiled_finish_equals_the_reference_exactly(name, n, opts, mode):
    rng = np.random.default_rng(len(name) * 100 + n)
    p = generate(name, n, **opts)
    m = _model(p, rng, mode)
    for k in range(6):
        q = p if k == 0 else p.relabel(rng.permutation(n))     # other placements, same model
        b = q.flow_bytes(float(rng.uniform(1e5, 5e7)))
        want = schedule(q, m.predict(q, b))[0]
        got = estimated_finish(q, m, b)
        assert got is not None and np.array_equal(got, want), (name, k, np.max(np.abs(got - want)))


@pytest.mark.parametrize("name,n,opts", CASES)
def test_compiled_send_groups_equal_the_reference(name, n, opts):
    p = generate(name, n, **opts).relabel(np.random.default_rng(n).permutation(n))
    sg = send_groups(p)
    group, prev = send_group_arrays(p)
    assert np.array_equal(group, sg.group) and np.array_equal(prev, sg.prev)


def test_compiled_mean_concurrency_handles_ties_as_the_reference():
    rng = np.random.default_rng(3)
    for _ in range(50):
        F = int(rng.integers(1, 40))
        g = rng.integers(0, 4, F)
        s = rng.integers(0, 5, F).astype(float)               # many equal times and zero-length flows
        e = s + rng.integers(0, 3, F)
        assert np.array_equal(_mean_concurrency(g, s, e), mean_concurrency(g, s, e))
    # the docstring's example: [0, 2] and [1, 3] give 1.5 each; [0, 4] with [1, 3] inside, 1.5 and 2
    assert _mean_concurrency(np.zeros(2, np.int64), np.array([0.0, 1.0]), np.array([2.0, 3.0])).tolist() == [1.5, 1.5]
    assert _mean_concurrency(np.zeros(2, np.int64), np.array([0.0, 1.0]), np.array([4.0, 3.0])).tolist() == [1.5, 2.0]


def test_the_reference_path_runs_where_the_kernel_does_not_apply():
    p = generate("ring", 4)
    m = _model(p, np.random.default_rng(1), "time")
    b = p.flow_bytes(1e6)
    assert estimated_finish(p, m, -b) is None                 # the reference raises for these
    m.line_rate = 0.0
    assert estimated_finish(p, m, b) is None
    with np.errstate(divide="ignore"), pytest.raises(ValueError, match="finite"):
        estimated_epoch(p, m, b)


@pytest.mark.parametrize("estimator", ["closed", "fluid"])
@pytest.mark.parametrize("topo,bg,place", [("star:hosts=16", ["into:3:p=2", "into:5:p=1"], "first"),
                                           ("fat-tree:k=4", ["pairs:x=4:p=2"], "random")])
def test_endpoint_scoring_gives_the_same_react_run(monkeypatch, estimator, topo, bg, place):
    """Whole REACT runs with the candidates scored from their endpoint arrays (candidates.py) and
    with every candidate pattern built, verified and scored: the same decisions and epochs."""
    from reactccl.netsim import SimulatedCluster
    from reactccl.topology import parse_topology, placement
    from reactccl.tuner import ReactParams, run_react
    from reactccl.tuner import steepest

    t = parse_topology(topo)
    hosts = placement(t, 8, place, seed=2)
    p = generate("nccl-tree", 8)
    from reactccl.tuner.candidates import SCORED, CandidateScorer

    answered = []
    orig = CandidateScorer.score_rows

    def counted(self, *a):
        out = orig(self, *a)
        answered.extend((out[0] == SCORED).tolist())
        return out

    monkeypatch.setattr(CandidateScorer, "score_rows", counted)
    runs = []
    for on in (True, False):
        monkeypatch.setattr(steepest, "ENDPOINT_SCORING", on)
        r = run_react(SimulatedCluster(t, hosts, 20e6, background=bg, seed=2), p, 60, ReactParams(estimator=estimator))
        runs.append(r)
    a, b = runs
    assert a.decisions and sum(answered) > 100               # the endpoint path did score the candidates
    assert [(d.epoch, d.kind, d.tried) for d in a.decisions] == [(d.epoch, d.kind, d.tried) for d in b.decisions]
    assert a.durations.tolist() == b.durations.tolist()


def test_swap_endpoints_is_the_masked_transposition():
    # Placement.apply's compiled relabelling against np.where(Swap.mask, sig[src], src)
    from reactccl.tuner.kernels import swap_endpoints
    from reactccl.tuner.transforms import Swap, Transform
    rng = np.random.default_rng(5)
    for name, n in (("nccl-tree", 8), ("ring", 6), ("recursive-doubling", 8)):
        p = generate(name, n)
        for _ in range(40):
            a, b = (int(x) for x in rng.choice(n, 2, replace=False))
            g = int(rng.integers(p.flow_graph.max() + 1))
            t0 = int(rng.integers(p.num_steps))
            t1 = int(rng.integers(t0, p.num_steps))
            for sw in (Swap(Transform.GLOBAL, a, b), Swap(Transform.CHUNK, a, b, g),
                       Swap(Transform.POSITION, a, b, g, t0, t1)):
                sig = np.arange(n)
                sig[a], sig[b] = b, a
                m = sw.mask(p)
                s, d = swap_endpoints(p.src, p.dst, p.flow_graph, p.step, sw.a, sw.b, sw.graph, sw.t0, sw.t1)
                assert np.array_equal(s, np.where(m, sig[p.src], p.src)), sw
                assert np.array_equal(d, np.where(m, sig[p.dst], p.dst)), sw


def test_pairwise_sum_is_numpys_sum_bit_for_bit():
    # the candidate kernel's mean of the chunk graphs' finish times must be numpy's, to the last bit
    from reactccl.tuner.candidates import _pairwise_sum
    rng = np.random.default_rng(11)
    for n in list(range(1, 40)) + [63, 64, 65, 127, 128]:
        for _ in range(20):
            a = rng.random(n) * 10.0 ** rng.uniform(-6, 0, n)
            assert _pairwise_sum(a) == np.add.reduce(a), n
            assert _pairwise_sum(a) / n == a.mean(), n


def test_candidate_kernel_pins_the_modules_it_compiles_in():
    # numba keys candidates.py's disk cache on that file alone: an edit of a callee's file must
    # come with a new pin in candidates.PINNED (reactccl/numba_cache.py)
    from pathlib import Path

    from reactccl.numba_cache import file_pin
    from reactccl.tuner import candidates
    root = Path(candidates.__file__).parent.parent
    for name, pin in candidates.PINNED.items():
        assert file_pin(root / name) == pin, name
    assert candidates._CACHE


@pytest.mark.parametrize("name", ["ring-allgather", "ring-reducescatter", "nccl-tree"])
def test_apply_after_a_global_swap_uses_the_current_chunk_graphs(name):
    # a ① swap of a blocked collective moves blocks, so a later ②/③ swap names the current
    # pattern's chunk graphs: apply must select what Swap.mask selects on the current pattern
    from reactccl.tuner.transforms import Placement, Swap, Transform
    rng = np.random.default_rng(3)
    p = generate(name, 4)
    for _ in range(30):
        a, b = (int(x) for x in rng.choice(4, 2, replace=False))
        pl = Placement(p).apply(Swap(Transform.GLOBAL, a, b))
        q = pl.pattern
        c, d = (int(x) for x in rng.choice(4, 2, replace=False))
        g = int(q.flow_graph[rng.integers(q.num_flows)])
        sw = Swap(Transform.CHUNK, c, d, g)
        sig = np.arange(4)
        sig[c], sig[d] = d, c
        m = sw.mask(q)
        nxt = pl.apply(sw)
        assert np.array_equal(nxt.src, np.where(m, sig[q.src], q.src)), (a, b, sw)
        assert np.array_equal(nxt.dst, np.where(m, sig[q.dst], q.dst)), (a, b, sw)

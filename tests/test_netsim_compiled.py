"""The compiled engine (numba) against the pure-Python reference engine: same flow times."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import FluidEngine, LongLived, SimulatedCluster, SimulationError
from reactccl.netsim.compiled import CompiledEngine
from reactccl.topology import fat_tree, leaf_spine


def random_case(seed: int):
    """A random network and dependency graph: F flows on 1-4 random links of L, each waiting on
    up to 3 earlier flows' arrivals (some through a join) and on up to 1 earlier flow's send end,
    plus long-lived background flows and one periodic source."""
    rng = np.random.default_rng(seed)
    L, F = int(rng.integers(3, 12)), int(rng.integers(5, 60))
    cap = rng.choice([10e9, 25e9, 40e9, 100e9], size=L)
    paths = [tuple(rng.choice(L, size=int(rng.integers(1, min(L, 4) + 1)), replace=False).tolist())
             for _ in range(F)]
    nbytes = rng.choice([1e5, 2.5e5, 1e6, 3e6], size=F) * rng.uniform(0.5, 1.5, size=F)
    lat = rng.choice([0.0, 1e-6, 3e-6], size=F)
    children = [[] for _ in range(F)]
    sent = [[] for _ in range(F)]
    waiting = np.zeros(F, dtype=np.int64)
    joins_wait, joins_kids = [], []
    for f in range(1, F):
        for d in rng.choice(f, size=min(f, int(rng.integers(0, 4))), replace=False).tolist():
            children[d].append(f)
            waiting[f] += 1
        if rng.random() < 0.3:
            d = int(rng.integers(f))
            sent[d].append(f)
            waiting[f] += 1
        if f >= 2 and rng.random() < 0.2:      # a join of two earlier arrivals
            a, b = rng.choice(f, size=2, replace=False).tolist()
            j = len(joins_wait)
            joins_wait.append(2)
            joins_kids.append([f])
            children[a].append(~j)
            children[b].append(~j)
            waiting[f] += 1
    release = np.where(waiting == 0, rng.choice([0.0, 0.0, 1e-4], size=F), np.inf)
    bg = [tuple(rng.choice(L, size=2, replace=False).tolist()) for _ in range(int(rng.integers(0, 4)))]
    per = (tuple(rng.choice(L, size=1).tolist()), float(rng.choice([5e3, 1e4])), 1e-6, 2e-5) \
        if rng.random() < 0.5 else None
    return cap, paths, nbytes, lat, waiting, children, sent, release, joins_wait, joins_kids, bg, per


def build(E, case):
    cap, paths, nbytes, lat, waiting, children, sent, release, jw, jk, bg, per = case
    eng = E(cap)
    if jw:
        eng.add_joins(jw, jk)
    eng.add_flows(paths, nbytes, lat, waiting, children, release, watched=True, sent_children=sent)
    if bg:
        eng.add_flows(bg, [np.inf] * len(bg), [0.0] * len(bg), [0] * len(bg), [()] * len(bg),
                      [0.0] * len(bg), watched=False)
    if per:
        eng.add_periodic(*per[:3], first=5e-6, period=per[3])
    return eng


@pytest.mark.parametrize("seed", range(40))
def test_compiled_engine_matches_the_reference_on_random_graphs(seed):
    case = random_case(seed)
    ref, fast = build(FluidEngine, case), build(CompiledEngine, case)
    assert fast.run() == pytest.approx(ref.run(), rel=1e-9)
    F = len(case[1])
    for name in ("start", "send_end", "end"):
        a, b = np.array(getattr(ref, name)[:F]), np.asarray(getattr(fast, name)[:F])
        assert np.allclose(a, b, rtol=1e-9, atol=0.0), name
    assert fast.events == ref.events
    assert sorted(fast.origin.items()) == sorted(ref.origin.items())
    for (i, left), (j, left2) in zip(ref.unfinished(), fast.unfinished()):
        assert i == j and left == pytest.approx(left2, rel=1e-9, abs=1e-6)
    assert fast.next_periodic == pytest.approx(ref.next_periodic, rel=1e-12)


@pytest.mark.parametrize("order", ["step", "data"])
@pytest.mark.parametrize("algo, n, topo_fn, seed", [
    ("nccl-tree", 8, lambda: fat_tree(4), 1), ("ring", 6, lambda: fat_tree(4), 2),
    ("recursive-doubling", 8, lambda: leaf_spine(4, 2, 4), 3), ("nccl-tree", 12, lambda: leaf_spine(4, 2, 4), 4),
    ("ring", 16, lambda: fat_tree(4), 5),
])
def test_compiled_cluster_matches_the_reference(algo, n, topo_fn, seed, order):
    topo = topo_fn()
    rng = np.random.default_rng(seed)
    hosts = rng.choice(topo.num_hosts, size=n, replace=False)
    outside = np.setdiff1d(np.arange(topo.num_hosts), hosts)
    bg = [LongLived(int(outside[0]), int(hosts[1]), 2)] if len(outside) else []
    traces = [SimulatedCluster(topo, hosts, 4e6, background=bg, seed=seed, order=order, engine=e).run_epoch(
        generate(algo, n)) for e in ("python", "compiled")]
    assert np.allclose(traces[0].start, traces[1].start, rtol=1e-9, atol=0.0)
    assert np.allclose(traces[0].end, traces[1].end, rtol=1e-9, atol=0.0)
    assert traces[0].meta["events"] == traces[1].meta["events"]


def test_compiled_engine_raises_as_the_reference():
    for E in (FluidEngine, CompiledEngine):
        eng = E(np.array([1e9]))
        eng.add_flows([[0], [0]], [1e3, 1e3], [0.0, 0.0], [1, 1], [[1], [0]], [np.inf, np.inf], watched=True)
        with pytest.raises(SimulationError, match="2 flows can never finish"):
            eng.run()
        eng = E(np.array([1e9]), max_backlog=3)
        eng.add_flows([[0]], [1e9], [0.0], [0], [()], [0.0], watched=True)
        eng.add_periodic([0], 1e6, 0.0, 0.0, 1e-6)      # 8 Tbit/s offered on a 1 Gbit/s link
        with pytest.raises(SimulationError, match="backlog grew to 4 bursts"):
            eng.run()
        eng = E(np.array([1e9]), max_events=5)
        eng.add_flows([[0]] * 4, [1e3] * 4, [0.0] * 4, [0, 1, 1, 1], [[1], [2], [3], []], [0.0] + [np.inf] * 3,
                      watched=True)
        with pytest.raises(SimulationError, match="max_events=5"):
            eng.run()


def test_job_data_paths_are_the_ecmp_paths_of_the_drawn_ports():
    from reactccl.netsim.jobdata import JobData
    topo, pattern = fat_tree(4), generate("ring", 8)
    place = np.array([0, 5, 9, 14, 2, 7, 11, 12])
    jd = JobData(topo, pattern, place, 1, 1e6, 4, "step")
    ports = np.random.default_rng(0).integers(4, size=pattern.num_flows)
    keys = np.column_stack([np.full(pattern.num_flows, 1), np.arange(pattern.num_flows), ports])
    ptr, links = topo.ecmp_paths(place[pattern.src], place[pattern.dst], keys)
    got_ptr, got_links, lat = jd.epoch_paths(ports)
    assert got_ptr.tolist() == ptr.tolist() and got_links.tolist() == links.tolist()
    assert lat == pytest.approx(np.add.reduceat(topo.latency[links], ptr[:-1]))


def test_compiled_engine_counts_the_rate_changes_of_each_solve():
    """Three flows of 1, 2 and 3 kB share one link, all released at 0: the solve at 0 sets three
    rates, the first end changes the other two, the second end the last one (6 rate changes in 3
    solves, every re-solved flow changed: the re-solved set is tight here)."""
    eng = CompiledEngine(np.array([1e9]))
    eng.add_flows([[0]] * 3, [1e3, 2e3, 3e3], [0.0] * 3, [0] * 3, [()] * 3, [0.0] * 3, watched=True)
    t = eng.run()
    assert t == pytest.approx(6e3 * 8 / 1e9, rel=1e-12)
    st = eng.stats
    assert (st["solves"], st["solved_flows"], st["changed"]) == (3, 6, 6)

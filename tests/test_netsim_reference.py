"""The incremental engine against a plain reference: recompute every rate at every event.

The reference below is a deliberately simple time-stepping fluid model (all active
flows re-water-filled after every event, no component tracking, no lazy updates).
Both must give the same flow start and end times on contended scenarios.
"""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import LongLived, SimulatedCluster, max_min_rates
from reactccl.pattern.order import send_groups
from reactccl.topology import fat_tree, leaf_spine


def reference(topo, trace, bg_paths, order="step"):
    """Start/end per job flow with full max-min recomputation after every event; in step order a
    flow also waits until the flows of :meth:`SendGroups.predecessors` have sent their last byte."""
    p = trace.pattern
    F = p.num_flows
    paths = list(trace.paths) + [np.asarray(b) for b in bg_paths]
    lat = np.array([topo.path_latency(x) for x in paths])
    rem = np.concatenate([trace.flow_bytes * 8.0, np.full(len(bg_paths), np.inf)])
    dep_ptr, dep_idx = p.dependencies()
    sg = send_groups(p)
    preds = [sg.predecessors(f) if order == "step" else np.zeros(0, dtype=np.int64) for f in range(F)]
    sent = np.full(F + len(bg_paths), np.inf)
    start = np.full(F, np.nan)
    end = np.full(F, np.nan)
    arrival = np.full(F + len(bg_paths), np.inf)
    sending = np.zeros(F + len(bg_paths), dtype=bool)
    sending[F:] = True
    t = 0.0
    while np.isnan(end).any():
        for f in np.flatnonzero(np.isnan(start)):
            deps = dep_idx[dep_ptr[f]:dep_ptr[f + 1]]
            if np.all(end[deps] <= t * (1 + 1e-12)) and np.all(sent[preds[f]] <= t * (1 + 1e-12)):
                start[f], sending[f] = t, True
        act = np.flatnonzero(sending)
        pf = np.repeat(np.arange(len(act)), [len(paths[a]) for a in act])
        pl = np.concatenate([paths[a] for a in act])
        rate = max_min_rates(pf, pl, topo.capacity, len(act))
        with np.errstate(invalid="ignore"):
            fin = np.where(np.isfinite(rem[act]), t + rem[act] / rate, np.inf)
        pending = arrival[:F][np.isnan(end) & np.isfinite(arrival[:F])]
        t_next = min(fin.min(initial=np.inf), pending.min(initial=np.inf))
        dt = t_next - t
        rem[act] = np.where(np.isfinite(rem[act]), rem[act] - rate * dt, np.inf)
        t = t_next
        done = act[np.isfinite(rem[act]) & (fin <= t * (1 + 1e-12))]
        sending[done] = False
        sent[done] = t
        arrival[done] = t + lat[done]
        arrived = np.flatnonzero(np.isnan(end) & (arrival[:F] <= t * (1 + 1e-12)))
        end[arrived] = arrival[arrived]
    return start, end


@pytest.mark.parametrize("order", ["step", "data"])
@pytest.mark.parametrize("algo, n, topo_fn, seed", [
    ("nccl-tree", 8, lambda: fat_tree(4), 1),
    ("ring", 6, lambda: fat_tree(4), 2),
    ("recursive-doubling", 8, lambda: leaf_spine(4, 2, 4), 3),
    ("nccl-tree", 12, lambda: leaf_spine(4, 2, 4), 4),
])
def test_engine_matches_full_recompute(algo, n, topo_fn, seed, order):
    topo = topo_fn()
    rng = np.random.default_rng(seed)
    hosts = rng.choice(topo.num_hosts, size=n, replace=False)
    outside = np.setdiff1d(np.arange(topo.num_hosts), hosts)
    # background from outside hosts into two ranks
    bg = [LongLived(int(outside[0]), int(hosts[1]), 2), LongLived(int(outside[-1]), int(hosts[n // 2]), 1)]
    cluster = SimulatedCluster(topo, hosts, 4e6, background=bg, seed=seed, order=order)
    trace = cluster.run_epoch(generate(algo, n))
    bg_paths = cluster.network.background_paths()
    assert len(bg_paths) == 3
    start, end = reference(topo, trace, bg_paths, order)
    assert np.allclose(trace.start, start, rtol=1e-9, atol=1e-15)
    assert np.allclose(trace.end, end, rtol=1e-9, atol=1e-15)
    # and the contention made a difference somewhere (not all flows at the alpha-beta time)
    alone = np.array([topo.path_latency(x) for x in trace.paths]) + trace.flow_bytes * 8 / 100e9
    assert (trace.fct > alone * (1 + 1e-6)).any()


def test_max_min_rates_bottleneck_property():
    """Max-min fairness characterised (Bertsekas & Gallager): the allocation is feasible and every
    flow crosses a saturated link on which no other flow gets more."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        F, L = int(rng.integers(1, 30)), int(rng.integers(1, 12))
        hops = rng.integers(1, min(L, 4) + 1, size=F)
        pf = np.repeat(np.arange(F), hops)
        pl = np.concatenate([rng.choice(L, size=h, replace=False) for h in hops])
        cap = rng.choice([10.0, 25.0, 40.0, 100.0], size=L)
        r = max_min_rates(pf, pl, cap, F)
        load = np.bincount(pl, weights=r[pf], minlength=L)
        assert (load <= cap * (1 + 1e-9)).all()
        saturated = load >= cap * (1 - 1e-9)
        top = np.zeros(L)
        np.maximum.at(top, pl, r[pf])
        ok = saturated[pl] & (r[pf] >= top[pl] * (1 - 1e-9))
        assert np.bincount(pf, weights=ok, minlength=F).min() >= 1

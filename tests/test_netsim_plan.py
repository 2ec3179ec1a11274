"""Epoch plans (the compiled engine's per-network cache of a job set's flow table): a changed
pattern, placement, size or network gets a new plan, results stay the reference engine's, and a
run leaves the cached table as it was."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import Job, LongLived, SimulatedNetwork
from reactccl.netsim.plan import PathList
from reactccl.topology import fat_tree


def _same(a, b):
    assert np.allclose(a.start, b.start, rtol=1e-9, atol=0.0)
    assert np.allclose(a.end, b.end, rtol=1e-9, atol=0.0)
    assert len(a.paths) == len(b.paths) and all(np.array_equal(x, y) for x, y in zip(a.paths, b.paths))
    assert a.meta["events"] == b.meta["events"]


def _networks(topo, **kw):
    return [SimulatedNetwork(topo, seed=4, engine=e, **kw) for e in ("python", "compiled")]


def test_a_changed_pattern_placement_or_size_gets_a_new_plan():
    topo = fat_tree(4)
    ring, tree = generate("ring", 8), generate("nccl-tree", 8)
    here, there = np.arange(8), np.array([0, 4, 8, 12, 1, 5, 9, 13])
    bg = [LongLived(3, 12, 2)]
    ref, fast = _networks(topo, background=bg)
    sequence = [(ring, here, 4e6), (tree, here, 4e6), (ring, here, 4e6), (ring, there, 4e6), (ring, here, 1e6),
                (ring, here, 4e6)]
    seen = []
    for pattern, hosts, size in sequence:
        a, b = (net.run_jobs([Job(pattern, hosts, size)])[0] for net in (ref, fast))
        _same(a, b)
        seen.append(b.duration)
    assert len(fast._plans) == 4                      # ring/here/4MB is one plan, used three times
    assert seen[0] != seen[1] and seen[4] < seen[0]


def test_two_jobs_with_background_match_the_reference_and_the_plan_is_not_consumed():
    topo = fat_tree(4)
    jobs = [Job(generate("ring", 6), np.arange(0, 12, 2), 2e6), Job(generate("nccl-tree", 5), np.arange(1, 11, 2), 3e6)]
    ref, fast = _networks(topo, background=[LongLived(13, 1, 1), LongLived(15, 2, 1)])
    (plan_key,) = [None]
    for _ in range(3):
        for a, b in zip(ref.run_jobs(jobs), fast.run_jobs(jobs)):
            _same(a, b)
        (plan_key, plan), = fast._plans.items()
        jwait = plan.table.jwait.copy()
    fast.run_jobs(jobs)
    assert np.array_equal(plan.table.jwait, jwait)     # join counters are counted down on a copy
    assert list(fast._plans) == [plan_key]


def test_a_degraded_network_does_not_share_plans_with_another():
    topo, pattern = fat_tree(4), generate("ring", 8)
    job = [Job(pattern, np.arange(8), 4e6)]
    whole = SimulatedNetwork(topo, seed=1).run_jobs(job)[0]
    ref, fast = _networks(topo, degrade="random:k=3:rate=10G")
    _same(ref.run_jobs(job)[0], fast.run_jobs(job)[0])
    assert fast.run_jobs(job)[0].duration > 0 and whole.duration > 0
    assert fast._plans and all(p.jobs[0].pattern is pattern for p in fast._plans.values())


def test_path_list_indexes_like_a_list():
    links, ptr = np.array([5, 6, 7, 8, 9]), np.array([0, 2, 2, 5])
    p = PathList(links, ptr)
    assert len(p) == 3 and p[0].tolist() == [5, 6] and p[1].tolist() == [] and p[-1].tolist() == [7, 8, 9]
    assert [x.tolist() for x in p] == [[5, 6], [], [7, 8, 9]]
    assert [x.tolist() for x in p[1:]] == [[], [7, 8, 9]]
    with pytest.raises(IndexError, match="flow 3 out of range for 3 flows"):
        p[3]

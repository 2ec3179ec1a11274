"""Fluid simulator: alpha-beta closed forms, REACT §4.3, max-min sharing, determinism, degraded links."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import FluidEngine, LongLived, SimulatedCluster, SimulationError, max_min_rates
from reactccl.pattern import PatternBuilder, verify
from reactccl.topology import fat_tree, star

G = 100e9  # bit/s
US = 1e-6


def build(n, flows, sizes=(1.0,), collective="allreduce", root=None):
    """A pattern from (step, src, dst, chunk ids, op) tuples; chunk i has size sizes[i], its own graph."""
    b = PatternBuilder(collective, n, root=root)
    for i, s in enumerate(sizes):
        b.chunk(s, graph=i)
    for step, src, dst, chunks, op in flows:
        b.flow(step, src, dst, chunks, op)
    return b.build()


# ---------------------------------------------------------------- alpha-beta exactness
def test_chain_broadcast_is_alpha_beta():
    # 0 -> 1 -> 2 -> 3 on a star: 3 hops of (2 x 1 us + 1 MB at 100 Gbps = 80 us), nothing shared
    p = build(4, [(0, 0, 1, [0], "copy"), (1, 1, 2, [0], "copy"), (2, 2, 3, [0], "copy")],
              collective="broadcast", root=0)
    verify(p)
    tr = SimulatedCluster(star(4), np.arange(4), 1e6).run_epoch(p)
    assert tr.start.tolist() == pytest.approx([0, 82 * US, 164 * US], abs=1e-12)
    assert tr.end.tolist() == pytest.approx([82 * US, 164 * US, 246 * US], abs=1e-12)
    assert tr.duration == pytest.approx(246 * US, abs=1e-12)
    assert tr.algbw == pytest.approx(1e6 / 246e-6)
    assert tr.busbw == pytest.approx(tr.algbw)  # broadcast factor 1


def test_ring_allreduce_on_star_is_alpha_beta():
    # 2(n-1) steps of (alpha + S/n * 8 / C): 6 x (2 us + 250 kB at 100 Gbps = 20 us) = 132 us
    p = generate("ring", 4)
    tr = SimulatedCluster(star(6), np.array([5, 0, 3, 1]), 1e6).run_epoch(p)
    assert tr.duration == pytest.approx(132 * US, rel=1e-12)
    assert np.allclose(tr.fct, 22 * US, rtol=1e-12)
    assert tr.busbw == pytest.approx(1e6 / 132e-6 * 2 * 3 / 4)


def test_reduce_tree_on_fat_tree_with_distinct_links():
    # ranks on h0, h1 (same edge switch: 2 links), h15, h14 (other pod). 1->0 and 3->2 at step 0,
    # then 2->0 across pods (6 links). 2->0 starts when 3->2 arrives (82 us), after 1->0 stopped
    # sending (80 us), so no link is shared: 82 + 6 us + 80 us = 168 us, whatever ECMP picks.
    p = build(4, [(0, 1, 0, [0], "reduce"), (0, 3, 2, [0], "reduce"), (1, 2, 0, [0], "reduce")],
              collective="reduce", root=0)
    verify(p)
    for seed in range(4):
        tr = SimulatedCluster(fat_tree(4), np.array([0, 1, 15, 14]), 1e6, seed=seed).run_epoch(p)
        assert tr.end.tolist() == pytest.approx([82 * US, 82 * US, 168 * US], abs=1e-12)
        assert [len(x) for x in tr.paths] == [2, 2, 6]


# ---------------------------------------------------------------------- REACT §4.3
def _reduce_end(trace):
    return float(trace.end[trace.pattern.op == 0].max())


def test_react_section_4_3_nccl_tree_16_ranks():
    p = generate("nccl-tree", 16)
    tree0 = [-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 14, 12, 14]
    tree1 = [1, 3, 1, 7, 5, 3, 5, 15, 9, 11, 9, 7, 13, 11, 13, -1]
    for g, parent in ((0, tree0), (1, tree1)):
        up = (p.flow_graph == g) & (p.op == 0)
        assert sorted(zip(p.src[up].tolist(), p.dst[up].tolist())) == \
            sorted((r, q) for r, q in enumerate(parent) if q >= 0)
    topo = star(18, rate=100e9, latency=2e-6)  # path alpha = 4 us
    place = np.arange(16)
    s = 2e6

    base = SimulatedCluster(topo, place, s, ecmp_ports=1).run_epoch(p)
    assert _reduce_end(base) == pytest.approx(576 * US, rel=1e-12)  # 4a + 7/2 b s

    congested = SimulatedCluster(topo, place, s, background=[LongLived(16, 3, 2)])
    assert _reduce_end(congested.run_epoch(p)) == pytest.approx(656 * US, rel=1e-12)  # 4a + (3 + p/2) b s

    perm = np.arange(16)
    perm[[2, 3]] = [3, 2]
    swapped = p.relabel(perm, graph=1)  # 3 is interior only in tree 1 (graph 1)
    verify(swapped)
    assert _reduce_end(congested.run_epoch(swapped)) == pytest.approx(576 * US, rel=1e-12)


# ------------------------------------------------------------------------ max-min
def test_max_min_rates_hand_cases():
    # A on links 0,1; B on 0; C on 1; caps [10, 4]: link 1 bottleneck (A = C = 2), then B = 8
    r = max_min_rates(np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1]), np.array([10.0, 4.0]), 3)
    assert r.tolist() == pytest.approx([2, 8, 2])
    # parking lot: A crosses links 0,1,2 (cap 1 each), B, C, D one link each: all 1/2
    r = max_min_rates(np.array([0, 0, 0, 1, 2, 3]), np.array([0, 1, 2, 0, 1, 2]), np.ones(3), 4)
    assert r.tolist() == pytest.approx([0.5] * 4)
    # three levels: link 0 (cap 3) has A,B,C; link 1 (cap 1) has A; link 2 (cap 1.5) has B, D
    r = max_min_rates(np.array([0, 0, 1, 1, 2, 3]), np.array([0, 1, 0, 2, 0, 2]), np.array([3.0, 1.0, 1.5]), 4)
    assert r.tolist() == pytest.approx([1.0, 0.75, 1.25, 0.75])
    assert max_min_rates(np.zeros(0, int), np.zeros(0, int), np.ones(2), 1).tolist() == [np.inf]


def test_two_flows_share_a_downlink_then_one_speeds_up():
    # h0->h2 carries 1 MB, h1->h2 0.5 MB: both 50 Gbps until the short one has sent (80 us);
    # the long one has 0.5 MB left at 100 Gbps (40 us): send ends at 120 us, arrival +2 us.
    p = build(3, [(0, 0, 2, [0], "reduce"), (0, 1, 2, [1], "reduce")], sizes=(2 / 3, 1 / 3))
    tr = SimulatedCluster(star(3), np.arange(3), 1.5e6).run_epoch(p)
    assert tr.flow_bytes.tolist() == pytest.approx([1e6, 0.5e6])
    assert tr.end.tolist() == pytest.approx([122 * US, 82 * US], rel=1e-12)


def test_flow_limited_elsewhere_leaves_capacity_to_others():
    # h0->h2 and h1->h2 share h2's downlink; h1->h3 shares h1's uplink with h1->h2, and h3's
    # downlink is degraded to 20 Gbps: h1->h3 gets 20, h1->h2 and h0->h2 get 50 each.
    topo = star(4)
    p = build(4, [(0, 0, 2, [0], "reduce"), (0, 1, 2, [1], "reduce"), (0, 1, 3, [2], "reduce")],
              sizes=(0.5, 0.25, 0.25))
    down3 = topo.host_links(3)[1]
    tr = SimulatedCluster(topo, np.arange(4), 4e5, degrade={down3: 20e9}).run_epoch(p)
    # h1->h2 sends 100 kB at 50 Gbps (16 us); h0->h2 has sent 100 of its 200 kB by then and sends
    # the rest alone at 100 Gbps (8 us, done at 24 us); h1->h3: 100 kB at 20 Gbps = 40 us. Each +2 us.
    assert tr.end.tolist() == pytest.approx([26 * US, 18 * US, 42 * US], rel=1e-12)


# ------------------------------------------------------------------ determinism
def test_same_seed_same_trace_and_ports_vary_with_seed():
    p = generate("nccl-tree", 8)
    topo = fat_tree(4)

    def run(seed):
        c = SimulatedCluster(topo, np.arange(0, 16, 2), 20e6, background=[LongLived(1, 4, 2)], seed=seed)
        return [c.run_epoch(p) for _ in range(3)]

    a, b, c = run(7), run(7), run(8)
    for x, y in zip(a, b):
        assert np.array_equal(x.start, y.start) and np.array_equal(x.end, y.end)
        assert np.array_equal(x.meta["ports"], y.meta["ports"])
        assert all(np.array_equal(u, v) for u, v in zip(x.paths, y.paths))
    assert not np.array_equal(a[0].meta["ports"], a[1].meta["ports"])  # redrawn every epoch
    assert not all(np.array_equal(x.meta["ports"], y.meta["ports"]) for x, y in zip(a, c))
    assert a[0].meta["epoch"] == 0 and a[2].meta["epoch"] == 2 and a[0].meta["seed"] == 7
    assert set(np.concatenate([t.meta["ports"] for t in a]).tolist()) <= {0, 1, 2, 3}
    # each path is ECMP's pick for (job 0, flow i, the port drawn this epoch)
    tr = a[1]
    for i in range(p.num_flows):
        want = topo.ecmp_path(tr.meta["src_host"][i], tr.meta["dst_host"][i], (0, i, tr.meta["ports"][i]))
        assert np.array_equal(tr.paths[i], want)


def test_single_port_keeps_paths():
    p = generate("ring", 8)
    c = SimulatedCluster(fat_tree(4), np.arange(0, 16, 2), 1e6, ecmp_ports=1, seed=3)
    a, b = c.run_epoch(p), c.run_epoch(p)
    assert all(np.array_equal(u, v) for u, v in zip(a.paths, b.paths))
    assert a.duration == b.duration


# -------------------------------------------------------------- degraded links
def test_degraded_link_slows_flow_by_hand():
    p = build(2, [(0, 0, 1, [0], "reduce")])
    topo = star(2)
    down1 = topo.host_links(1)[1]
    tr = SimulatedCluster(topo, [0, 1], 1e6, degrade={down1: 30e9}).run_epoch(p)
    assert tr.duration == pytest.approx(2 * US + 8e6 / 30e9, rel=1e-12)  # 268.67 us
    assert tr.throughput[0] == pytest.approx(8e6 / (2 * US + 8e6 / 30e9))


def test_errors():
    p = build(2, [(0, 0, 1, [0], "reduce")])
    with pytest.raises(ValueError, match="placement has 3 hosts for 2 ranks"):
        SimulatedCluster(star(3), [0, 1, 2], 1e6).run_epoch(p)
    with pytest.raises(ValueError, match="repeats a host"):
        SimulatedCluster(star(3), [1, 1], 1e6).run_epoch(p)
    with pytest.raises(ValueError, match="ecmp_ports"):
        SimulatedCluster(star(3), [0, 1], 1e6, ecmp_ports=0)
    # a watched flow waiting on a dependency that never arrives
    eng = FluidEngine(np.array([1e9]))
    eng.add_flows([[0]], [1.0], [0.0], [1], [[]], [0.0], watched=True)
    with pytest.raises(SimulationError, match="1 flows can never finish"):
        eng.run()


def test_single_rank_has_no_flows():
    tr = SimulatedCluster(star(2), [0], 1e6).run_epoch(generate("ring", 1))
    assert tr.pattern.num_flows == 0 and tr.duration == 0.0

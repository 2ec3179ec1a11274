"""Step order within a chunk graph (the default execution model): pipelines pipeline.

Hand-computed times: 1 GB at 100 Gbit/s is 80 ms on one link; a star path is two 1 µs links.
"""

import networkx as nx
import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import SimulatedCluster, run_simulation
from reactccl.topology import Topology, star
from reactccl.topology.graph import add_cable

GB, RATE = 1e9, 100e9
T_GB = 8 * GB / RATE          # 80 ms


def host_mesh(n: int, latency: float = 0.0) -> Topology:
    """Hosts joined pairwise by their own cables (no switch): no two pairs share a link."""
    g = nx.DiGraph()
    for i in range(n):
        g.add_node(f"h{i}", kind="host")
    for i in range(n):
        for j in range(i + 1, n):
            add_cable(g, f"h{i}", f"h{j}", RATE, latency)
    return Topology(g, f"mesh{n}")


def test_binomial_broadcast_is_three_messages_in_step_order():
    # the root sends 0->4, 0->2, 0->1 one after another on its uplink: 3 x 80 ms (+ 2 us per hop)
    p = generate("binomial-broadcast", 8)
    tr = SimulatedCluster(star(8), np.arange(8), GB).run_epoch(p)
    assert tr.duration == pytest.approx(3 * (T_GB + 2e-6), rel=1e-12)
    root = np.flatnonzero(p.src == 0)
    assert tr.start[root].tolist() == pytest.approx([0.0, T_GB, 2 * T_GB], rel=1e-12)
    # data-driven only: the three start together and share the uplink (the root's last send ends at 3 x 80 ms)
    data = SimulatedCluster(star(8), np.arange(8), GB, order="data").run_epoch(p)
    assert data.start[root].tolist() == [0.0, 0.0, 0.0]
    assert data.duration == pytest.approx(6 * T_GB + 6e-6, rel=1e-12)


@pytest.mark.parametrize("slices", [1, 2, 3, 4, 5])
def test_pipelined_nccl_tree_matches_its_closed_form(slices):
    # nccl-tree on 8 ranks: depth D = 3, slice j of a tree sends at step (height + j) going up and
    # (D + depth + j) going down, 2D + K - 1 steps. With every rank pair on its own link and no latency,
    # every step takes one slice time tau = (S / 2K) * 8 / rate and the epoch is (2D + K - 1) tau.
    # (The trees share the cables 5-6 and 1-2 in opposite roles; from K = 6 on, tree 0's reduce slices
    # and tree 1's broadcast overlap on 5->6, so the closed form stops at K = 5.)
    tau = (GB / (2 * slices)) * 8 / RATE
    tr = SimulatedCluster(host_mesh(8), np.arange(8), GB, ecmp_ports=1).run_epoch(
        generate("nccl-tree", 8, slices=slices))
    assert tr.duration == pytest.approx((2 * 3 + slices - 1) * tau, rel=1e-12)


@pytest.mark.parametrize("slices", [1, 2, 3])
def test_pipelined_nccl_tree_with_latency(slices):
    # with 1 us per hop, the critical path crosses 2D = 6 hops once each
    tau = (GB / (2 * slices)) * 8 / RATE
    tr = SimulatedCluster(host_mesh(8, 1e-6), np.arange(8), GB, ecmp_ports=1).run_epoch(
        generate("nccl-tree", 8, slices=slices))
    assert tr.duration == pytest.approx((2 * 3 + slices - 1) * tau + 6e-6, rel=1e-12)


def test_slices_pipeline_on_a_star_only_in_step_order():
    # issue 12: on star:hosts=8 every slice count gave 400 ms; in step order more slices are faster,
    # approaching 2 S per uplink (a rank interior in one tree sends S/2 up and S/2 to each of two
    # children, and S/2 up as a leaf in the other): 160 ms
    times = {k: SimulatedCluster(star(8), np.arange(8), GB).run_epoch(generate("nccl-tree", 8, slices=k)).duration
             for k in (1, 4, 64)}
    assert times[1] == pytest.approx(5 * T_GB + 12e-6, rel=1e-9)       # the data-driven and step times agree at K=1
    assert times[1] > times[4] > times[64] > 2 * T_GB
    assert times[64] < 2.1 * T_GB
    data = SimulatedCluster(star(8), np.arange(8), GB, order="data").run_epoch(generate("nccl-tree", 8, slices=64))
    assert data.duration == pytest.approx(times[1], rel=1e-9)


def test_run_simulation_takes_the_order():
    res = run_simulation("binomial-broadcast", 8, topology="star:hosts=8", size=GB, epochs=1, order="data")
    assert res.durations[0] == pytest.approx(6 * T_GB + 6e-6, rel=1e-12)
    with pytest.raises(ValueError, match="order: expected one of step, data"):
        run_simulation("ring", 4, topology="star:hosts=4", epochs=1, order="lock")

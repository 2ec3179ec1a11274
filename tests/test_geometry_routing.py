"""Fabric topologies route on their geometry: dimension-order on tori/HyperX, the sender's spine
on spine-leaf (SP-allreduce §2.3, §6.3), so the simulator loads the links the cost model loads."""

import networkx as nx
import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.torus_common import pack
from reactccl.netsim import SimulatedCluster
from reactccl.topology import Topology, TopologyError
from reactccl.topology.torus import HyperXGeometry, SpineLeafGeometry, TorusGeometry, fabric_topology

GEOMETRIES = [TorusGeometry((4, 5)), TorusGeometry((3, 4, 5)), TorusGeometry((6, 6)), HyperXGeometry((4, 4)),
              SpineLeafGeometry(q=3, leaves=4), SpineLeafGeometry(q=2, leaves=1)]


@pytest.mark.parametrize("geom", GEOMETRIES, ids=lambda g: g.name)
def test_every_route_is_a_link_chain_from_src_to_dst(geom):
    topo = fabric_topology(geom)
    tail, head = geom.link_ends()
    assert (topo.link_src == tail).all() and (topo.link_dst == head).all()  # geometry link k == link k
    p = geom.num_nodes
    src, dst = np.divmod(np.arange(p * p), p)
    ptr, links = topo.ecmp_paths(src, dst, np.zeros((p * p, 1)))
    assert (np.diff(ptr) == geom.distance(src, dst)).all()
    for f in range(p * p):
        route = links[ptr[f]:ptr[f + 1]]
        nodes = [topo.hosts[src[f]]] + [topo.nodes[topo.link_dst[l]] for l in route]
        assert [topo.nodes[topo.link_src[l]] for l in route] == nodes[:-1]  # tail of each = head of previous
        assert nodes[-1] == topo.hosts[dst[f]]
    # the links of each route are the geometry's (route_pairs in any order)
    pidx, glinks = geom.route_pairs(src, dst)
    assert sorted(zip(pidx.tolist(), glinks.tolist())) == sorted(
        zip(np.repeat(np.arange(p * p), np.diff(ptr)).tolist(), links.tolist()))


def test_spine_leaf_topology_and_route_order():
    g = SpineLeafGeometry(q=2, leaves=3)  # hosts 0..5, host i of leaf j is node 2j + i
    topo = fabric_topology(g, link_rate=100e9, hop_latency=1e-6)
    assert topo.hosts == [f"n{i}" for i in range(6)]
    assert topo.switches == ["leaf0", "leaf1", "leaf2", "spine0", "spine1"]
    assert (topo.num_links, topo.router is not None) == (24, True)
    assert topo.capacity.tolist() == [100e9] * 24 and topo.latency.tolist() == [1e-6] * 24
    # ids: up 0..5, down 6..11, leaf j -> spine s 12 + 2j + s, spine s -> leaf j 18 + 2j + s
    assert [topo.describe_link(l) for l in (1, 10, 13, 23)] == [
        "n1->leaf0", "leaf2->n4", "leaf0->spine1", "spine1->leaf2"]
    # n1 (host index 1) -> n4 crosses spine 1, in route order, whatever the ECMP key
    for key in [(0, 0, 0), (3, 9, 1)]:
        assert topo.ecmp_path(1, 4, key).tolist() == [1, 13, 23, 10]
    assert topo.ecmp_path(4, 5, (0, 0, 0)).tolist() == [4, 11]  # same leaf: up, down
    assert topo.shortest_paths(1, 4)[0].size == 4 and len(topo.shortest_paths(1, 4)) == 2  # graph facts unchanged


def test_torus_uses_dimension_order_not_ecmp():
    g = TorusGeometry((8, 8))
    topo = fabric_topology(g)
    dst = int(g.node([[2, 7]])[0])
    want = [int(g.link(0, 0, 1)), int(g.link(8, 0, 1)), int(g.link(16, 1, -1))]  # +x, +x, then -y
    assert {tuple(topo.ecmp_path(0, dst, (0, f, 0)).tolist()) for f in range(16)} == {tuple(want)}
    # the same graph without a router hashes over all 3 shortest paths
    plain = Topology(topo.graph.copy(), "plain")
    assert plain.router is None and len(plain.shortest_paths(0, dst)) == 3
    assert len({tuple(plain.ecmp_path(0, dst, (0, f, 0)).tolist()) for f in range(16)}) > 1


def test_route_latency_and_rate_in_the_simulator():
    # 2-rank ring on hosts 0 and 2 of a spine-leaf (different leaves, both via spine 0, on disjoint
    # directed links): 2 steps of (4 links x 1 us + S/2 = 0.5 MB at 100 Gbps = 40 us) = 88 us
    topo = fabric_topology(SpineLeafGeometry(q=2, leaves=2), link_rate=100e9, hop_latency=1e-6)
    tr = SimulatedCluster(topo, [0, 2], 1e6, ecmp_ports=1).run_epoch(generate("ring", 2))
    assert tr.duration == pytest.approx(88e-6, rel=1e-12)
    assert [p.tolist() for p in tr.paths[:2]] == [[0, 8, 14, 6], [2, 10, 12, 4]]


def test_sp_spineleaf_reaches_the_bound():
    # p = 16 (4 leaves x 4 hosts): every link carries at most 15 flows of S/16, host links exactly 15, so
    # both steps take 15/16 S * 8 / C plus a 4-link latency: T = 2 (15/16 S 8 / C + 4 h)
    geom = SpineLeafGeometry(q=4, leaves=4)
    topo = fabric_topology(geom, 400e9, 400e-9)
    S = 16 * 2**20
    tr = SimulatedCluster(topo, np.arange(16), S, ecmp_ports=1).run_epoch(pack(generate("sp-spineleaf", 16, q=4)))
    assert tr.duration == pytest.approx(2 * (15 / 16 * S * 8 / 400e9 + 4 * 400e-9), rel=1e-9)


def test_router_output_is_checked():
    g = TorusGeometry((3, 3))
    topo = fabric_topology(g)

    def skip_a_hop(src, dst):
        pidx, links = g.route_pairs(src, dst)
        return pidx[1:], links[1:]  # drops the first link of pair 0

    bad = Topology(topo.graph.copy(), "bad", router=skip_a_hop)
    with pytest.raises(TopologyError, match="not a chain of links"):
        bad.ecmp_paths(np.array([0]), np.array([4]), np.zeros((1, 1)))
    with pytest.raises(TopologyError, match="out of range"):
        Topology(topo.graph.copy(), "bad", router=lambda s, d: (np.array([0]), np.array([99]))).ecmp_path(
            0, 1, (0,))


def test_link_order_keeps_a_numbering():
    gr = nx.DiGraph()
    gr.add_nodes_from([("a", {"kind": "host"}), ("b", {"kind": "host"})])
    gr.add_edge("a", "b", capacity=1.0, latency=0.0)
    gr.add_edge("b", "a", capacity=2.0, latency=0.0)
    t = Topology(gr, "two", link_order=[("b", "a"), ("a", "b")])
    assert (t.link_id("b", "a"), t.capacity.tolist()) == (0, [2.0, 1.0])
    with pytest.raises(TopologyError, match="each of the 2 edges once"):
        Topology(gr, "two", link_order=[("a", "b")])
    with pytest.raises(TopologyError, match="not an edge"):
        Topology(gr, "two", link_order=[("a", "b"), ("a", "a")])


def test_fabric_topology_rejects_other_geometries():
    with pytest.raises(ValueError, match="torus, HyperX or spine-leaf"):
        fabric_topology(object())

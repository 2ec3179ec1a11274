"""Torus, HyperX and spine-leaf geometry: numbering, neighbours, shortest routes."""

import numpy as np
import pytest

from reactccl.topology.torus import HyperXGeometry, SpineLeafGeometry, TorusGeometry


def test_torus_coords_and_links():
    g = TorusGeometry((4, 5))
    assert (g.num_nodes, g.degree, g.num_links, g.diameter) == (20, 4, 80, 4)
    assert g.coords([7]).tolist() == [[1, 2]]
    assert int(g.node([[1, 2]])[0]) == 7
    assert int(g.node([[-1, 5]])[0]) == 15  # (3, 0)
    # neighbours of node 0 in link order: +x, -x, +y, -y
    assert g.neighbours([0]).tolist() == [[5, 15, 1, 4]]
    tail, head = g.link_ends()
    assert (tail[:4].tolist(), head[:4].tolist()) == ([0, 0, 0, 0], [5, 15, 1, 4])


def test_torus_dimension_order_route():
    g = TorusGeometry((8, 8))
    # (0,0) -> (2,7): two hops +x, then one hop -y
    pidx, links = g.route_pairs([0], [g.node([[2, 7]])[0]])
    assert pidx.tolist() == [0, 0, 0]
    assert links.tolist() == [g.link(0, 0, 1), g.link(8, 0, 1), g.link(16, 1, -1)]
    # tie at n/2 goes the + way; distance is the sum of ring distances
    assert g.offsets([0], [4]).tolist() == [[0, 4]]
    assert g.distance([0, 0], [36, 9]).tolist() == [8, 2]


def test_torus_rejects_small_side():
    with pytest.raises(ValueError, match="side must be >= 3"):
        TorusGeometry((2, 4))


def test_hyperx_routes_at_most_two_hops():
    g = HyperXGeometry((4, 4))
    assert (g.degree, g.num_links) == (6, 96)
    pidx, links = g.route_pairs([0, 0, 5], [3, 15, 6])
    assert pidx.tolist() == [1, 0, 1, 2]  # dimension 0 hops first, then dimension 1
    # 0 -> 15: (0,0) -> (3,0) [dim 0, delta 3] -> (3,3) [dim 1, delta 3]
    assert links.tolist() == [g.link(0, 0, 3), g.link(0, 1, 3), g.link(12, 1, 3), g.link(5, 1, 1)]


def test_spine_leaf_routes():
    g = SpineLeafGeometry(q=2, leaves=3)  # hosts 0..5; host i on leaf j is j*2 + i
    assert g.num_links == 2 * 6 + 2 * 6
    pidx, links = g.route_pairs([0, 1], [1, 4])
    # 0 -> 1 same leaf: up 0, down 6+1; 1 -> 4 (host 0 of leaf 2) via spine 1
    assert sorted(zip(pidx.tolist(), links.tolist())) == [
        (0, 0), (0, 7), (1, 1), (1, 10), (1, 12 + 0 * 2 + 1), (1, 12 + 6 + 2 * 2 + 1)]
    assert g.distance([0, 1, 2], [1, 4, 2]).tolist() == [2, 4, 0]


def test_fabric_topology_keeps_link_ids():
    from reactccl.topology.torus import fabric_topology

    g = TorusGeometry((3, 4))
    topo = fabric_topology(g, link_rate=100e9, hop_latency=1e-6)
    assert (topo.num_hosts, topo.num_links) == (12, 48)
    tail, head = g.link_ends()
    assert topo.link_id("n0", f"n{head[1]}") == 1
    assert topo.capacity[0] == 100e9 and topo.latency[5] == 1e-6
    h = HyperXGeometry((3, 3))
    assert fabric_topology(h).num_links == h.num_links

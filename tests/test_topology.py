"""Topologies: sizes, paths, ECMP hashing, degraded links, specs and placement."""

import numpy as np
import pytest

from reactccl.topology import (
    Topology, TopologyError, UnitError, alibaba, fat_tree, full_mesh_tors, leaf_spine, parse_rate, parse_size,
    parse_time, parse_topology, placement, stable_hash, star,
)


def test_star_links_and_paths():
    t = star(18, rate=100e9, latency=2e-6)
    assert (t.num_hosts, t.num_links) == (18, 36)
    up, down = t.host_links(3)
    assert t.describe_link(up) == "h3->s0" and t.describe_link(down) == "s0->h3"
    paths = t.shortest_paths(3, 7)
    assert len(paths) == 1
    assert paths[0].tolist() == [t.host_links(3)[0], t.host_links(7)[1]]
    assert t.path_latency(paths[0]) == pytest.approx(4e-6)
    assert t.capacity[up] == 100e9


@pytest.mark.parametrize("k, hosts, switches", [(2, 2, 5), (4, 16, 20), (8, 128, 80)])
def test_fat_tree_sizes(k, hosts, switches):
    t = fat_tree(k)
    assert t.num_hosts == hosts == k ** 3 // 4
    assert len(t.switches) == switches == 5 * k * k // 4
    # k-ary: every switch (edge, aggregation, core) has exactly k ports
    deg = [t.graph.out_degree(s) for s in t.switches]
    assert set(deg) == {k}
    assert t.num_links == 2 * (hosts + k * (k // 2) ** 2 * 2)


def test_fat_tree_path_counts_and_lengths():
    t = fat_tree(4)
    # same edge switch, same pod, other pod
    assert [p.size for p in t.shortest_paths(0, 1)] == [2]
    same_pod = t.shortest_paths(0, 2)
    assert len(same_pod) == 2 and {p.size for p in same_pod} == {4}
    cross = t.shortest_paths(0, 15)
    assert len(cross) == 4 and {p.size for p in cross} == {6}
    # deterministic lexicographic order, all distinct, all start at h0's uplink
    assert [tuple(p) for p in cross] == sorted(tuple(p) for p in cross)
    assert len({tuple(p) for p in cross}) == 4
    assert all(p[0] == t.host_links(0)[0] and p[-1] == t.host_links(15)[1] for p in cross)
    # links chain: dst of one is src of the next
    for p in cross:
        assert np.array_equal(t.link_dst[p[:-1]], t.link_src[p[1:]])


def test_ecmp_is_stable_and_spreads():
    t = fat_tree(4)
    a = t.ecmp_path(0, 15, (0, 7, 1))
    assert np.array_equal(a, t.ecmp_path(0, 15, (0, 7, 1)))
    assert np.array_equal(a, t.ecmp_path("h0", "h15", (0, 7, 1)))
    picks = {tuple(t.ecmp_path(0, 15, (0, f, p))) for f in range(8) for p in range(4)}
    assert len(picks) == 4  # all four core paths get used
    # the vectorised router agrees with the scalar one
    src, dst = np.array([0, 0, 3, 5]), np.array([15, 2, 4, 5])
    keys = np.array([[0, 7, 1], [1, 2, 3], [0, 0, 0], [0, 0, 0]])
    ptr, links = t.ecmp_paths(src, dst, keys)
    for i in range(3):
        assert links[ptr[i]:ptr[i + 1]].tolist() == t.ecmp_path(src[i], dst[i], keys[i]).tolist()
    assert ptr[4] == ptr[3]  # host to itself: empty path


def test_stable_hash_fixed_values():
    # splitmix64 chain: fixed outputs so a change of the hash (and of every ECMP choice) is noticed
    h = stable_hash(np.array([0, 1]), np.array([2, 3]))
    assert h.dtype == np.uint64
    assert h.tolist() == [17701926653090987459, 3499917017700846390]
    assert h[0] != h[1] and stable_hash(1, 2) != stable_hash(2, 1)


def test_leaf_spine_alibaba_full_mesh():
    ls = leaf_spine(4, 2, 4)
    assert ls.num_hosts == 16 and len(ls.shortest_paths(0, 4)) == 2 and ls.shortest_paths(0, 4)[0].size == 4
    ali = alibaba()
    assert ali.num_hosts == 720 and len(ali.switches) == 51
    assert len(ali.shortest_paths(0, 15)) == 3  # h0 on tor0, h15 on tor1: via any of 3 aggs
    fm = full_mesh_tors(4, 2)
    assert fm.num_hosts == 8 and fm.num_links == 2 * (8 + 6)
    assert [p.size for p in fm.shortest_paths(0, 7)] == [3]


def test_degraded_copy():
    t = fat_tree(4)
    lid = int(t.shortest_paths(0, 15)[0][2])
    d = t.degraded({lid: 30e9})
    assert d.capacity[lid] == 30e9 and t.capacity[lid] == 100e9
    u, v = d.nodes[d.link_src[lid]], d.nodes[d.link_dst[lid]]
    assert d.graph.edges[u, v]["capacity"] == 30e9 and t.graph.edges[u, v]["capacity"] == 100e9
    assert [p.tolist() for p in d.shortest_paths(0, 15)] == [p.tolist() for p in t.shortest_paths(0, 15)]
    with pytest.raises(TopologyError, match="link id 999"):
        t.degraded({999: 1e9})
    with pytest.raises(TopologyError, match="capacity must be > 0"):
        t.degraded({0: 0})


def test_parse_topology_specs_and_errors():
    assert parse_topology("star:hosts=18").num_hosts == 18
    t = parse_topology("fat-tree:k=4,rate=40G,latency=2us")
    assert t.num_hosts == 16 and set(t.capacity) == {40e9} and set(t.latency) == {2e-6}
    assert parse_topology("leaf-spine:leaves=4,spines=2,hosts=4").num_hosts == 16
    assert parse_topology("alibaba").num_hosts == 720
    assert parse_topology("alibaba:tors=4,hosts=2").num_hosts == 8
    assert parse_topology("full-mesh:tors=4,hosts=2").num_hosts == 8
    with pytest.raises(TopologyError, match="unknown name 'ring'"):
        parse_topology("ring:n=4")
    with pytest.raises(TopologyError, match="unknown key 'n' for fat-tree"):
        parse_topology("fat-tree:n=4")
    with pytest.raises(TopologyError, match="missing key 'hosts'"):
        parse_topology("star")
    with pytest.raises(TopologyError, match="even k"):
        parse_topology("fat-tree:k=5")
    with pytest.raises(TopologyError, match="'rate'"):
        parse_topology("star:hosts=2,rate=fast")


def test_units():
    assert parse_rate("100G") == 100e9 and parse_rate("30Gbps") == 30e9 and parse_rate(1e9) == 1e9
    assert parse_time("1us") == 1e-6 and parse_time("2µs") == 2e-6 and parse_time("2ms") == 2e-3
    assert parse_size("20MB") == 20e6 and parse_size("64KiB") == 65536 and parse_size("1MiB") == 2 ** 20
    with pytest.raises(UnitError, match="size: unknown unit"):
        parse_size("20XB")
    with pytest.raises(UnitError, match="positive"):
        parse_time("0us")


def test_placement():
    t = fat_tree(4)
    assert placement(t, 4, "first").tolist() == [0, 1, 2, 3]
    r1, r2 = placement(t, 8, "random", seed=3), placement(t, 8, "random", seed=3)
    assert r1.tolist() == r2.tolist() and len(set(r1.tolist())) == 8
    assert placement(t, 3, [0, 5, 9]).tolist() == [0, 5, 9]
    assert placement(t, 3, "0,5,h9").tolist() == [0, 5, 9]
    with pytest.raises(TopologyError, match="17 ranks need 17 hosts"):
        placement(t, 17, "first")
    with pytest.raises(TopologyError, match="host 5 given for more than one rank"):
        placement(t, 3, [5, 1, 5])
    with pytest.raises(TopologyError, match="2 hosts given for 3 ranks"):
        placement(t, 3, [0, 1])
    with pytest.raises(TopologyError, match="out of range"):
        placement(t, 2, [0, 16])


def test_custom_graph_errors():
    import networkx as nx
    g = nx.DiGraph()
    g.add_node("a", kind="host")
    g.add_node("b", kind="router")
    with pytest.raises(TopologyError, match="node 'b': kind"):
        Topology(g)
    g.nodes["b"]["kind"] = "switch"
    g.add_edge("a", "b", capacity=0, latency=0)
    with pytest.raises(TopologyError, match="capacity must be > 0"):
        Topology(g)

"""Dragonfly (Kim et al. 2008): sizes, wiring, minimal local-global-local routes, spec, simulation."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import SimulatedCluster
from reactccl.topology import TopologyError, dragonfly, parse_topology, placement, star
from reactccl.topology.dragonfly import dragonfly_gateway


def all_pairs(t):
    H = t.num_hosts
    s, d = np.meshgrid(np.arange(H), np.arange(H), indexing="ij")
    s, d = s.ravel(), d.ravel()
    return s, d, *t.ecmp_paths(s, d, np.zeros((len(s), 1)))


@pytest.mark.parametrize("a, p, h", [(4, 2, 2), (2, 1, 1), (3, 2, 1), (6, 3, 3)])
def test_dragonfly_counts(a, p, h):
    t = dragonfly(a, p, h)
    g = a * h + 1
    assert t.num_hosts == g * a * p and len(t.switches) == g * a
    assert t.num_links == 2 * (g * a * p + g * a * (a - 1) // 2 + g * (g - 1) // 2)
    # every router: p hosts, a-1 local and h global cables
    for r in t.switches:
        nbrs = list(t.graph.successors(r))
        hosts = [n for n in nbrs if t.graph.nodes[n]["kind"] == "host"]
        local = [n for n in nbrs if n.startswith(r.split("r")[0] + "r") and n not in hosts]
        assert (len(hosts), len(local), len(nbrs) - len(hosts) - len(local)) == (p, a - 1, h)


def test_dragonfly_one_global_cable_per_group_pair():
    a, h = 4, 2
    gw = dragonfly_gateway(a, h)
    g = a * h + 1
    assert (gw[~np.eye(g, dtype=bool)] >= 0).all()
    # each router of a group holds exactly h of its group's a*h global cables
    for i in range(g):
        assert np.bincount(np.delete(gw[i], i), minlength=a).tolist() == [h] * a
    t = dragonfly(a, 1, h)
    glob = [(u, v) for u, v in t.graph.edges if u.split("r")[0] != v.split("r")[0]
            and t.graph.nodes[u]["kind"] == t.graph.nodes[v]["kind"] == "switch"]
    pairs = {frozenset((u.split("r")[0], v.split("r")[0])) for u, v in glob}
    assert len(glob) == g * (g - 1) and len(pairs) == g * (g - 1) // 2


def test_dragonfly_minimal_routes_by_hand():
    t = dragonfly(4, 2, 2)
    s, d, ptr, links = all_pairs(t)
    lengths = np.diff(ptr)
    router_hops = np.where(s == d, 0, lengths - 2)
    assert router_hops.max() == 3  # local, global, local
    # h0 (g0r0) -> h71 (g8r3): group 0 reaches group 8 on port 7, router 7 // 2 = 3; group 8 reaches
    # group 0 on port (0 - 8 - 1) mod 9 = 0, router 0
    f = 71
    nodes = [t.nodes[t.link_src[x]] for x in links[ptr[f]:ptr[f + 1]]] + ["h71"]
    assert nodes == ["h0", "g0r0", "g0r3", "g8r0", "g8r3", "h71"]
    # from h0 (g0r0, the gateway to groups 1 and 2, which land on their router 3): 1 self, 1 host on its
    # router (2 links), 6 in its group + 4 on g1r3/g2r3 (3 links), 12 + 12 with one local hop (4 links),
    # the 36 others (5 links)
    assert np.bincount(lengths[s == 0], minlength=6).tolist() == [1, 0, 1, 10, 24, 36]


def test_dragonfly_spec_and_errors():
    t = parse_topology("dragonfly:a=4:p=2:h=2")
    assert t.name == "dragonfly:a=4,p=2,h=2" and t.num_hosts == 72 and t.router is not None
    t = parse_topology("dragonfly:a=2,p=1,h=1,rate=200G,latency=500ns")
    assert t.capacity.max() == 200e9 and t.latency.max() == pytest.approx(500e-9)
    with pytest.raises(TopologyError, match="missing key 'h'"):
        parse_topology("dragonfly:a=4,p=2")
    with pytest.raises(TopologyError, match="a: expected an integer >= 1"):
        parse_topology("dragonfly:a=0,p=2,h=2")


def test_dragonfly_runs_in_the_simulator():
    # ring over router 0 of groups 0..7 of dragonfly:a=2,p=1,h=4: group i reaches i+1 from its router 0
    # and lands on router 1 there, so each ring hop is up, global, local, down: 4 links and no shared link.
    # Against a star (2 links): the same 14 steps, each 2 link latencies (2 us) longer
    t = dragonfly(2, 1, 4)
    ring = generate("ring", 8)
    fly = SimulatedCluster(t, np.arange(0, 16, 2), 8e6).run_epoch(ring).duration
    ref = SimulatedCluster(star(8), np.arange(8), 8e6).run_epoch(ring).duration
    assert fly == pytest.approx(ref + 14 * 2e-6, rel=1e-9)
    assert placement(t, 4, "first").tolist() == [0, 1, 2, 3]

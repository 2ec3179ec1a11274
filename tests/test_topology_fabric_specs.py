"""parse_topology on the SP-allreduce fabrics: torus:AxB, hyperx:NxN, spineleaf:LEAVESxQ."""

import numpy as np
import pytest

from reactccl.topology import TopologyError, parse_topology


def test_torus_spec_builds_the_geometry_fabric():
    t = parse_topology("torus:4x4")
    assert (t.name, t.num_hosts, t.num_links) == ("torus:4x4", 16, 64)  # 2d links per node
    assert set(t.capacity) == {400e9} and set(t.latency) == {400e-9}  # SP-allreduce §7.1 defaults
    # n3 = (0,3) -> n4 = (1,0): dimension 0 first (+1 to n7 = (1,3)), then dimension 1 (+1, wraps to n4)
    path = t.ecmp_path(3, 4, (0, 0, 0))
    assert [t.describe_link(l) for l in path] == ["n3->n7", "n7->n4"]
    assert parse_topology("TORUS:4X4").name == "torus:4x4"  # names and shapes are case-insensitive
    t3 = parse_topology("torus:3x4x5,rate=100G,latency=1us")
    assert (t3.name, t3.num_hosts, t3.num_links) == ("torus:3x4x5,rate=100G,latency=1us", 60, 360)
    assert set(t3.capacity) == {100e9} and set(t3.latency) == {1e-6}


def test_hyperx_and_spineleaf_specs():
    h = parse_topology("hyperx:4x4")
    assert (h.num_hosts, h.num_links) == (16, 16 * 6)  # degree 2 * (4 - 1)
    # n0 = (0,0) -> n5 = (1,1): one hop per differing coordinate
    assert [h.describe_link(l) for l in h.ecmp_path(0, 5, (0, 0, 0))] == ["n0->n4", "n4->n5"]
    s = parse_topology("spineleaf:2x3,rate=100G")  # 2 leaves of 3 hosts, 3 spines
    assert (s.name, s.num_hosts) == ("spineleaf:2x3,rate=100G", 6)
    assert s.switches == ["leaf0", "leaf1", "spine0", "spine1", "spine2"]
    assert s.num_links == 2 * 6 + 2 * 2 * 3 and set(s.capacity) == {100e9}
    # host 1 of leaf 0 (n1) to leaf 1 (n4) goes through spine 1, the sender's host index
    assert [s.describe_link(l) for l in s.ecmp_path(1, 4, (0, 0, 0))] == [
        "n1->leaf0", "leaf0->spine1", "spine1->leaf1", "leaf1->n4"]
    assert np.isclose(s.path_latency(s.ecmp_path(1, 4, (0, 0, 0))), 4 * 400e-9)


@pytest.mark.parametrize("spec, match", [
    ("torus:0x8", r"every torus side must be >= 3 .*got 0x8"),
    ("torus:1x8", r"every torus side must be >= 3 .*got 1x8"),
    ("torus", r"expected torus:AxB\[xC\.\.\.\]"),
    ("torus:4x", r"expected torus:AxB"),
    ("torus:rate=1G", r"expected torus:AxB"),
    ("torus:4x4,k=3", r"unknown key 'k' for torus; allowed: latency, rate"),
    ("torus:4x4,rate=fast", r"bad value for 'rate'"),
    ("hyperx:4x3", r"HyperX sides must be equal and >= 2, got 4x3"),
    ("spineleaf:4", r"expected spineleaf:LEAVESxQ .*got 4"),
    ("spineleaf:0x4", r"expected spineleaf:LEAVESxQ .*got 0x4"),
    ("mesh:4x4", r"known: alibaba, dragonfly, fat-tree, full-mesh, hyperx, leaf-spine, rail, spineleaf, star, torus"),
])
def test_fabric_spec_errors(spec, match):
    with pytest.raises(TopologyError, match=match):
        parse_topology(spec)


def test_zero_latency_spec_gives_the_pure_bandwidth_time():
    # latency=0 (an alpha-free model) used to be refused by the spec parser, though links allow it
    from reactccl.algorithms import generate
    from reactccl.netsim import SimulatedCluster
    from reactccl.topology import parse_topology
    t = parse_topology("star:hosts=4,latency=0")
    assert t.path_latency(t.ecmp_path(0, 1, (0, 0, 0))) == 0.0
    epoch = SimulatedCluster(t, np.arange(4), 20e6, seed=0).run_epoch(generate("ring", 4))
    assert epoch.duration == pytest.approx(2 * 3 / 4 * 20e6 * 8 / 100e9, rel=1e-9)   # 2 (N-1)/N M / B
    with pytest.raises(Exception, match="latency"):
        parse_topology("star:hosts=4,latency=-1us")

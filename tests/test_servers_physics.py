"""Physics of NCCL's ring and tree on servers: the busbw bound of reactccl.cost.link_bound by hand,
the same bound read off the routed pattern, and the flow-level simulator reaching it (issue 32
item 3), on the real servers topologies: ``rail:`` (a NIC per GPU, PXN) and a fat-tree whose
servers share one NIC (``fat-tree:k=4,gpus=4``)."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.cost.link_bound import busbw_bound, link_bytes, servers_ring_busbw_bound
from reactccl.netsim import SimulatedCluster
from reactccl.topology import parse_topology, rail

GB = 1e9
NIC, PCIE, NVLINK = 400e9, 512e9, 3.6e12          # rail's defaults, bit/s per direction (an H100-class server)


def test_closed_form_bound_by_hand():
    # 8 x 400 Gb/s NICs = 400 GB/s per server, below 450 GB/s NVLink: the NICs bound
    assert servers_ring_busbw_bound(4, 8, 8, 400e9, 3.6e12, 512e9) == 400 * GB
    # 9 channels on 8 NICs: NIC 0 carries two, 9 x 50 / 2 = 225 GB/s
    assert servers_ring_busbw_bound(4, 8, 9, 400e9, 3.6e12) == 225 * GB
    # NVLink at 200 GB/s binds first
    assert servers_ring_busbw_bound(4, 8, 8, 400e9, 1.6e12) == 200 * GB
    # one shared NIC: one NIC's worth; PCIe below the NIC binds instead
    assert servers_ring_busbw_bound(4, 1, 1, 400e9, 3.6e12) == 50 * GB
    assert servers_ring_busbw_bound(4, 8, 8, 400e9, 3.6e12, pcie_rate=200e9) == 200 * GB
    assert servers_ring_busbw_bound(1, 8, 8, 400e9, 3.6e12) == 450 * GB
    with pytest.raises(ValueError, match="channels: expected an integer >= 1, got 0"):
        servers_ring_busbw_bound(4, 8, 0, 400e9, 3.6e12)
    with pytest.raises(ValueError, match="nic_rate: expected a rate > 0 bit/s, got 0"):
        servers_ring_busbw_bound(4, 8, 8, 0, 3.6e12)


@pytest.mark.parametrize("S, G, K, C, nvlink", [(4, 8, 8, 8, 3.6e12), (4, 8, 8, 9, 3.6e12), (3, 4, 2, 2, 3.6e12),
                                                (2, 8, 8, 8, 1.6e12), (4, 8, 1, 1, 3.6e12), (4, 4, 4, 16, 3.6e12)])
def test_routed_bound_is_the_closed_form(S, G, K, C, nvlink):
    topo = rail(S, G, nics=K, nvlink=nvlink)
    p = generate("ring", S * G, servers=S, gpus=G, nics=K, channels=C)
    got, link = busbw_bound(p, topo, np.arange(S * G), 1e9)
    assert got == pytest.approx(servers_ring_busbw_bound(S, K, C, NIC, nvlink, PCIE), rel=1e-9)
    # the busiest link is an NVLink one exactly when NVLink is below the NICs' share, else a NIC's
    nic_bound = C * NIC / -(-C // K) / 8
    assert topo.link_kinds()[link] == ("nvlink" if nvlink / 8 < nic_bound else "nic"), topo.describe_link(link)


def test_flat_ring_on_servers_uses_one_nic():
    # rank order crosses every server boundary into local GPU 0: with PXN everything leaves by NIC 0
    topo = parse_topology("rail:servers=4,gpus=8")
    up = topo.servers.nic_up                                    # (S, K): NIC -> its rail leaf
    p = generate("ring", 32, gpus=8, hierarchy="flat")
    b = link_bytes(p, topo, np.arange(32), 1e9)
    assert b[up[:, 0]] == pytest.approx([2 * 31 / 32 * 1e9] * 4) and not b[up[:, 1:]].any()
    assert busbw_bound(p, topo, np.arange(32), 1e9)[0] == pytest.approx(50 * GB)
    # the hierarchical ring spreads the same bytes over the 8 NICs, 1/8 each
    b = link_bytes(generate("ring", 32, gpus=8), topo, np.arange(32), 1e9)
    assert b[up[2]] == pytest.approx([2 * 31 / 32 * 1e9 / 8] * 8)


@pytest.mark.parametrize("nvlink, bound", [(3.6e12, 400 * GB), (1.6e12, 200 * GB)])
def test_simulated_1gb_allreduce_reaches_the_bound(nvlink, bound):
    # 4 servers x 8 GPUs, 8 NICs: the hierarchical ring within 2% of min(NICs, NVLink), the flat
    # ring on the same GPUs within 2% of one NIC (50 GB/s); no pattern beats its routed bound
    topo = rail(4, 8, nvlink=nvlink)
    place, size = np.arange(32), 1e9
    got = {}
    for label, name, opts in [("hier", "ring", {"gpus": 8}), ("flat", "ring", {"gpus": 8, "hierarchy": "flat"}),
                              ("tree", "nccl-tree", {"gpus": 8}), ("flat-tree", "nccl-tree", {"hierarchy": "flat"})]:
        p = generate(name, 32, size=size, **opts)
        got[label] = SimulatedCluster(topo, place, size, ecmp_ports=1).run_epoch(p).busbw
        assert got[label] <= busbw_bound(p, topo, place, size)[0] * (1 + 1e-9), label
    assert got["hier"] == pytest.approx(bound, rel=0.02)
    assert got["flat"] == pytest.approx(50 * GB, rel=0.02)
    assert got["tree"] > 4 * got["flat-tree"]


# ------------------------------------------------------------ one shared NIC per server
SHARED = "fat-tree:k=4,gpus=4"     # 16 servers of 4 GPUs, each on one 100 Gb/s NIC (the host slot's cable)


def test_shared_nic_ring_bound_by_hand():
    # K = 1: every channel leaves and enters by the one NIC: 100 Gb/s = 12.5 GB/s whatever C; the
    # flat ring in rank order is the same ring (intra order 0..G-1 on the only NIC), so no gain
    topo = parse_topology(SHARED)
    assert (topo.servers.K, topo.servers.nic_rate, topo.servers.pxn) == (1, 100e9, False)
    for C in (1, 2, 3):
        p = generate("ring", 16, gpus=4, nics=1, channels=C)
        got, link = busbw_bound(p, topo, np.arange(16), 1e9)
        assert got == pytest.approx(servers_ring_busbw_bound(4, 1, C, 100e9, NVLINK, PCIE)) == 12.5 * GB
        assert topo.link_kinds()[link] == "nic"
    flat = generate("ring", 16, hierarchy="flat")
    one = generate("ring", 16, gpus=4, nics=1)
    assert np.array_equal(flat.src, one.src) and np.array_equal(flat.dst, one.dst)
    # each server's NIC carries one ring edge out and one in: 2(N-1)/N of the message each way
    b = link_bytes(one, topo, np.arange(16), 1e9)
    lay = topo.servers
    assert b[lay.nic_up[:4, 0]] == pytest.approx([2 * 15 / 16 * 1e9] * 4)
    assert b[lay.nic_down[:4, 0]] == pytest.approx([2 * 15 / 16 * 1e9] * 4)
    assert not b[lay.nic_up[4:, 0]].any()                       # servers outside the job carry nothing


def test_shared_nic_tree_bound_by_hand():
    # 4 servers, channels 0 and 1 (tree 0 and tree 1 of ncclGetDtree(4)), M/2 each, up then down
    # every tree edge. Tree 0: server 2 under 0, servers 1 and 3 under 2; tree 1 (mirror, node ->
    # 3 - node): server 1 under 3, 0 and 2 under 1. Into server 1's NIC: tree 0 down from 2 (M/2),
    # tree 1 up from 0 and 2 and down from 3 (3 x M/2): 2M; server 2 the same by symmetry; servers
    # 0 and 3 (a root and a leaf): M. Out of each NIC as much as into it. So algbw <= 12.5 GB/s / 2
    # and busbw <= 2(15/16) x 6.25 GB/s
    topo = parse_topology(SHARED)
    p = generate("nccl-tree", 16, gpus=4, nics=1, slices=4)
    b = link_bytes(p, topo, np.arange(16), 1e9)
    lay = topo.servers
    assert b[lay.nic_down[:4, 0]] == pytest.approx([1e9, 2e9, 2e9, 1e9])
    assert b[lay.nic_up[:4, 0]] == pytest.approx([1e9, 2e9, 2e9, 1e9])
    got, link = busbw_bound(p, topo, np.arange(16), 1e9)
    assert got == pytest.approx(2 * 15 / 16 * 12.5 * GB / 2) and link == lay.nic_down[1, 0]


def test_shared_nic_simulated_1gb_allreduce():
    # the ring at one NIC's 12.5 GB/s, flat or hierarchical; the hierarchical tree near its bound
    # (11.7 GB/s) and above the flat tree, whose 16 ranks cross the shared NICs more often
    topo = parse_topology(SHARED)
    place, size = np.arange(16), 1e9
    got = {}
    for label, name, opts in [("hier", "ring", {"gpus": 4, "nics": 1}), ("flat", "ring", {"hierarchy": "flat"}),
                              ("tree", "nccl-tree", {"gpus": 4, "nics": 1}),
                              ("flat-tree", "nccl-tree", {"hierarchy": "flat"})]:
        p = generate(name, 16, size=size, **opts)
        got[label] = SimulatedCluster(topo, place, size, ecmp_ports=1).run_epoch(p).busbw
        assert got[label] <= busbw_bound(p, topo, place, size)[0] * (1 + 1e-9), label
    assert got["hier"] == pytest.approx(12.5 * GB, rel=0.02) and got["flat"] == pytest.approx(12.5 * GB, rel=0.02)
    assert got["tree"] == pytest.approx(2 * 15 / 16 * 6.25 * GB, rel=0.03)
    assert got["tree"] > 1.4 * got["flat-tree"]

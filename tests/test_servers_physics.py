"""Physics of NCCL's ring on servers: the busbw bound of reactccl.cost.link_bound by hand, the same
bound read off the routed pattern, and the flow-level simulator reaching it (issue 32 item 3),
on a servers topology built by hand (tests/hand_servers.py)."""

import numpy as np
import pytest
from hand_servers import H100, rail_servers

from reactccl.algorithms import generate
from reactccl.cost.link_bound import busbw_bound, link_bytes, servers_ring_busbw_bound
from reactccl.netsim import SimulatedCluster

GB = 1e9


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
    rates = {**H100, "nvlink": nvlink}
    topo = rail_servers(S, G, K, **rates)
    p = generate("ring", S * G, servers=S, gpus=G, nics=K, channels=C)
    got, link = busbw_bound(p, topo, np.arange(S * G), 1e9)
    want = servers_ring_busbw_bound(S, K, C, rates["nic_rate"], nvlink, rates["pcie"])
    assert got == pytest.approx(want, rel=1e-9)
    # the busiest link is an NVLink one exactly when NVLink is below the NICs' share
    u, v = topo.nodes[topo.link_src[link]], topo.nodes[topo.link_dst[link]]
    nic_bound = C * rates["nic_rate"] / -(-C // K) / 8
    assert ("nvs" in u + v) == (nvlink / 8 < nic_bound) and ("nic" in u + v) != ("nvs" in u + v), (u, v)


def test_flat_ring_on_servers_uses_one_nic():
    # rank order crosses every server boundary into local GPU 0: everything leaves by NIC 0
    topo = rail_servers(4, 8, 8, **H100)
    p = generate("ring", 32, gpus=8, hierarchy="flat")
    b = link_bytes(p, topo, np.arange(32), 1e9)
    nic_out = [[b[topo.link_id(f"s{s}nic{k}", f"rail{k}")] for k in range(8)] for s in range(4)]
    assert all(row[0] == pytest.approx(2 * 31 / 32 * 1e9) and not any(row[1:]) for row in nic_out)
    assert busbw_bound(p, topo, np.arange(32), 1e9)[0] == pytest.approx(50 * GB)
    # the hierarchical ring spreads the same bytes over the 8 NICs, 1/8 each
    h = generate("ring", 32, gpus=8)
    b = link_bytes(h, topo, np.arange(32), 1e9)
    assert [b[topo.link_id(f"s2nic{k}", f"rail{k}")] for k in range(8)] == pytest.approx([2 * 31 / 32 * 1e9 / 8] * 8)


@pytest.mark.parametrize("nvlink, bound", [(3.6e12, 400 * GB), (1.6e12, 200 * GB)])
def test_simulated_1gb_allreduce_reaches_the_bound(nvlink, bound):
    # 4 servers x 8 GPUs, 8 NICs: the hierarchical ring within 2% of min(NICs, NVLink), the flat
    # ring on the same GPUs within 2% of one NIC (50 GB/s); no pattern beats its routed bound
    topo = rail_servers(4, 8, 8, **{**H100, "nvlink": nvlink})
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

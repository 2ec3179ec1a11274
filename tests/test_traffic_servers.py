"""Background, degraded links and --list-links on a topology of multi-GPU servers."""

import json

import numpy as np
import pytest

from reactccl.cli.main import main
from reactccl.netsim import SimulatedCluster
from reactccl.pattern import PatternBuilder
from reactccl.topology import parse_topology
from reactccl.traffic import BackgroundError, IntoRanks, job_cables, parse_degrade, random_degrade, resolve_background

US = 1e-6


def one_flow(n, src, dst):
    b = PatternBuilder("allreduce", n)
    b.flow(0, src, dst, [b.chunk(1.0, 0)])
    return b.build()


def test_background_into_a_rank_loads_exactly_its_nic():
    t = parse_topology("rail:servers=2,gpus=2")     # a job on all 4 GPUs; outside: st0, st1
    lay, kinds = t.servers, t.link_kinds()
    flows, _ = resolve_background([IntoRanks((3,), p=2)], t, np.arange(4), seed=0)
    assert len(flows) == 2 and {d for _, d in flows} == {3}
    nic_links = set()
    for k, (s, d) in enumerate(flows):
        path = t.ecmp_path(s, d, (-1, k, 0))
        nic_links |= {int(lk) for lk in path if kinds[lk] == "nic"}
    assert nic_links == {int(lay.nic_down[1, 1])}           # r1l0 -> s1nic1, rank 3's NIC


def test_background_into_a_rank_shares_its_nic_with_the_job():
    # one 1 MB flow rank 0 -> rank 3 (s0g0 -> s1g1, PXN on rail 1) with 2 long-lived flows into rank 3:
    # the three share r1l0 -> s1nic1 (400 Gbit/s, the tightest link): 8e6 bits at 400/3 Gbit/s = 60 us,
    # plus 6 links x 1 us.  Alone: 20 us + 6 us.
    t = parse_topology("rail:servers=2,gpus=2")
    pat = one_flow(4, 0, 3)
    alone = SimulatedCluster(t, np.arange(4), 1e6).run_epoch(pat).duration
    loaded = SimulatedCluster(t, np.arange(4), 1e6, background=[IntoRanks((3,), p=2)]).run_epoch(pat).duration
    assert alone == pytest.approx(26 * US, rel=1e-12)
    assert loaded == pytest.approx(66 * US, rel=1e-12)


def test_degrade_by_name_and_by_nic():
    t = parse_topology("rail:servers=2,gpus=2")
    lay = t.servers
    lid = t.link_id("s0nic1", "r1l0")
    assert parse_degrade("link=s0nic1->r1l0:rate=100G", t) == {lid: 100e9}
    assert parse_degrade(f"link={lid},r1l0->s0nic1:rate=100G", t) == {lid: 100e9, t.link_id("r1l0", "s0nic1"): 100e9}
    assert parse_degrade("nic:server=1,nic=0,rate=100G", t) == {int(lay.nic_up[1, 0]): 100e9,
                                                                int(lay.nic_down[1, 0]): 100e9}
    assert parse_degrade("nic:server=1:nic=0:rate=100G", t) == parse_degrade("nic:server=1,nic=0,rate=100G", t)
    for bad, msg in [("link=s0nic1->r0l0:rate=1G", "no link 's0nic1'->'r0l0'"),
                     ("nic:server=2,nic=0,rate=1G", "'server': 2 out of range 0..1"),
                     ("nic:server=0,nic=2,rate=1G", "'nic': 2 out of range 0..1"),
                     ("nic:server=0,rate=1G", "missing field 'nic'"),
                     ("nic:server=0,nic=0,rate=500G", "above link"),
                     ("link=foo:rate=1G", "must be an integer")]:
        with pytest.raises(BackgroundError, match=msg):
            parse_degrade(bad, t)
    with pytest.raises(BackgroundError, match="has no servers"):
        parse_degrade("nic:server=0,nic=0,rate=1G", parse_topology("star:hosts=2"))


def test_random_and_job_degrade_draw_network_cables_only():
    t = parse_topology("rail:servers=2,gpus=2")
    kinds = t.link_kinds()
    net = t.network_cables()
    assert len(net) == 10 and len(t.cables()) == 18       # 4 NIC + 4 leaf-spine + 2 storage cables
    assert set(kinds[net.ravel()].tolist()) == {"nic", "fabric"}
    every = random_degrade(t, 10, 1e9, seed=3)
    assert sorted(every) == sorted(net.ravel().tolist())
    with pytest.raises(BackgroundError, match="has 10 network cables"):
        random_degrade(t, 11, 1e9)
    cables = job_cables(t, np.arange(4))
    # the job's flows cross only NIC cables (PXN keeps each hop on one rail: no spine)
    assert set(kinds[cables.ravel()].tolist()) == {"nic"} and len(cables) == 4
    flat = parse_topology("fat-tree:k=4")
    assert np.array_equal(flat.network_cables(), flat.cables())


def test_cli_list_links_kinds_and_json(capsys):
    assert main(["simulate", "--list-links", "-t", "rail:servers=2,gpus=2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "reactccl.links/1" and doc["topology"] == "rail:servers=2,gpus=2"
    rows = doc["links"]
    assert len(rows) == 36 and rows[0] == {"link": 0, "cable": 0, "src": "s0g0", "dst": "s0nvs", "kind": "nvlink",
                                           "capacity": 3.6e12, "latency": 1e-6}
    assert {r["kind"] for r in rows} == {"nvlink", "pcie", "nic", "fabric"}
    assert main(["simulate", "--list-links", "-t", "fat-tree:k=2,gpus=2"]) == 0
    out = capsys.readouterr().out
    assert "kind" in out and "s1nic0" in out and "pcie" in out
    assert main(["simulate", "--list-links", "-t", "star:hosts=2", "--json"]) == 0
    assert {r["kind"] for r in json.loads(capsys.readouterr().out)["links"]} == {"fabric"}


def test_cli_simulate_on_servers_with_nic_degrade(capsys):
    # ring over 4 GPUs of 2 servers: the NIC degrade on s0nic0 (rail 0, which both inter-server
    # ring hops use with PXN) slows the epoch
    args = ["simulate", "-a", "ring", "-n", "4", "-t", "rail:servers=2,gpus=2", "--size", "10MB", "-e", "1",
            "--json"]
    assert main(args) == 0
    clean = json.loads(capsys.readouterr().out)
    assert main(args + ["-d", "nic:server=0,nic=0,rate=100G"]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert slow["degraded"] == {"s0nic0->r0l0": 100e9, "r0l0->s0nic0": 100e9}
    assert slow["durations_s"][0] > 2 * clean["durations_s"][0]

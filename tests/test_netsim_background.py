"""Background traffic, periodic bulk flows across epochs, degrade specs and several jobs on one network."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import (
    BackgroundError, Bulk, IntoRanks, Job, LongLived, OutOfRanks, RandomPairs, SimulatedCluster, SimulatedNetwork,
    parse_background, parse_degrade, random_degrade, resolve_background,
)
from reactccl.pattern import PatternBuilder
from reactccl.topology import fat_tree, star

US = 1e-6


def one_flow(n=2, src=0, dst=1):
    b = PatternBuilder("allreduce", n)
    b.flow(0, src, dst, [b.chunk(1.0, 0)])
    return b.build()


def test_bulk_burst_shares_then_carries_into_next_epoch():
    # job h0->h1, 1 MB (8e6 bits); burst h2->h1 of 1 MB at t = 40 us, period 1 s.
    # epoch 0: 4e6 bits alone, then 50/50 for 80 us -> send ends 120 us, arrives 122 us;
    #          the burst has sent 4e6 + 0.2e6 bits by 122 us, 3.8e6 bits are left.
    # epoch 1: the leftover and the job share 50/50 until the leftover ends (76 us), then the
    #          job sends its last 4.2e6 bits alone (42 us): 118 + 2 = 120 us.
    c = SimulatedCluster(star(3), [0, 1], 1e6, background=[Bulk(2, 1, 1e6, 1.0, 40 * US)])
    d = [c.run_epoch(one_flow()).duration for _ in range(3)]
    assert d == pytest.approx([122 * US, 120 * US, 82 * US], rel=1e-12)
    assert c.network.clock == pytest.approx(324 * US, rel=1e-12)


def test_bulk_period_follows_global_clock():
    # bursts of 250 kB from h2 to h1 every 100 us from t = 20 us; each epoch moves 10e6 bits through
    # h1's downlink (job 8e6 + one burst 2e6) in 100 us when the burst falls inside the epoch.
    c = SimulatedCluster(star(3), ["h0", "h1"], 1e6, background=[Bulk("h2", "h1", 2.5e5, 100 * US, 20 * US)])
    t0 = c.run_epoch(one_flow())
    assert t0.duration == pytest.approx(102 * US, rel=1e-12)
    # epoch 1 starts at 102 us global; the next burst at 120 us = 18 us local
    t1 = c.run_epoch(one_flow())
    assert t1.duration == pytest.approx(102 * US, rel=1e-12)


def test_long_lived_into_rank_halves_rate():
    c = SimulatedCluster(star(3), [0, 1], 1e6, background=[LongLived(2, 1, 3)])
    # 3 external flows + the job flow on h1's downlink: 25 Gbps -> 320 us + 2 us
    assert c.run_epoch(one_flow()).duration == pytest.approx(322 * US, rel=1e-12)


def test_text_specs_accepted_by_the_cluster():
    topo = star(3)
    down1 = topo.host_links(1)[1]
    c = SimulatedCluster(topo, [0, 1], 1e6, background=["flow:src=h2,dst=r1,count=3"],
                         degrade=f"link={down1}:rate=50G")
    # 4 flows on a 50 Gbps downlink: 12.5 Gbps -> 640 us + 2 us
    assert c.run_epoch(one_flow()).duration == pytest.approx(642 * US, rel=1e-12)
    assert c.network.long_lived == [(2, 1)] * 3 and c.network.degrade == {down1: 50e9}


def test_resolve_specs_seeded_and_outside():
    topo = fat_tree(4)
    place = np.arange(8)
    ll, bulks = resolve_background([IntoRanks((3, 5), 2), OutOfRanks((0,), 1)], topo, place, seed=4)
    assert len(ll) == 5 and bulks == []
    assert [d for _, d in ll[:4]] == [3, 3, 5, 5] and ll[0] == ll[1] and ll[2] == ll[3]
    assert all(s >= 8 for s, _ in ll[:4]) and ll[4][0] == 0 and ll[4][1] >= 8
    assert ll == resolve_background([IntoRanks((3, 5), 2), OutOfRanks((0,), 1)], topo, place, seed=4)[0]
    pairs, _ = resolve_background([RandomPairs(8, 2)], topo, place, seed=1)
    assert len(pairs) == 16 and sorted({s for s, _ in pairs}) == list(range(8))  # x = 8: every rank
    assert all(d >= 8 for _, d in pairs)
    inbound, _ = resolve_background([RandomPairs(3, 1, "in")], topo, place, seed=1)
    assert all(s >= 8 and d < 8 for s, d in inbound)
    with pytest.raises(BackgroundError, match="x=9 pairs need 9 distinct ranks"):
        resolve_background([RandomPairs(9, 1)], topo, place)
    with pytest.raises(BackgroundError, match="no outside host"):
        resolve_background([IntoRanks((0,), 1)], topo, np.arange(16))
    with pytest.raises(BackgroundError, match="rank 8 out of range"):
        resolve_background([IntoRanks((8,), 1)], topo, place)
    with pytest.raises(BackgroundError, match="to itself"):
        resolve_background([LongLived(3, "h3")], topo, place)


def test_parse_background_forms_and_errors():
    place = np.array([4, 5, 6, 7])
    assert parse_background("into:3:p=2") == IntoRanks((3,), 2)
    assert parse_background("into:1,2:p=1") == IntoRanks((1, 2), 1)
    assert parse_background("out:3:p=1") == OutOfRanks((3,), 1)
    assert parse_background("pairs:x=4:p=2") == RandomPairs(4, 2, "out")
    assert parse_background("pairs:x=2:p=1:dir=in") == RandomPairs(2, 1, "in")
    assert parse_background("flow:src=h16,dst=r3,count=2", place) == LongLived("h16", 7, 2)
    assert parse_background("bulk:src=h20,dst=h3,bytes=50MB,period=2ms") == Bulk("h20", "h3", 50e6, 2e-3, 0.0)
    assert parse_background("bulk:src=1,dst=r0,bytes=1KiB,period=1us,phase=2us", place) == \
        Bulk(1, 4, 1024.0, 1e-6, 2e-6)
    for bad, msg in [("storm:3", "unknown background kind 'storm'"), ("into:p=2", "give the ranks first"),
                     ("into:3:q=2", "unknown field 'q'"), ("pairs:p=2", "missing field 'x'"),
                     ("into:3:p=two", "'p' must be an integer"), ("bulk:src=h1,dst=h2,bytes=5MB", "'period'"),
                     ("bulk:src=h1,dst=h2,bytes=5XB,period=1ms", "bytes: unknown unit"),
                     ("flow:src=r9,dst=h1", "no job rank 9")]:
        with pytest.raises(BackgroundError, match=msg):
            parse_background(bad, place)


def test_degrade_specs():
    topo = fat_tree(4)
    assert parse_degrade("link=12:rate=30G", topo) == {12: 30e9}
    assert parse_degrade("link=12,13:rate=50G", topo) == {12: 50e9, 13: 50e9}
    d = parse_degrade("random:k=2:rate=30G", topo, seed=5)
    assert d == random_degrade(topo, 2, 30e9, seed=5) and len(d) == 4  # two cables, both directions
    pairs = {tuple(sorted(c)) for c in topo.cables().tolist()}
    ids = sorted(d)
    assert sum(1 for c in pairs if set(c) <= set(ids)) == 2
    for bad, msg in [("random:k=2", "missing field 'rate'"), ("link=999:rate=1G", "id 999 out of range"),
                     ("link=3:rate=fast", "cannot parse"), ("random:k=500:rate=1G", "k=500")]:
        with pytest.raises(BackgroundError, match=msg):
            parse_degrade(bad, topo)


def test_two_jobs_share_a_receiver():
    # job A: h0 -> h2, 1 MB; job B: h1 -> h2, 0.5 MB. 50/50 on h2's downlink until B has sent
    # (80 us), then A alone (0.5 MB, 40 us): A 122 us, B 82 us. Alone each would take 82 / 42 us.
    net = SimulatedNetwork(star(3))
    a, b = net.run_jobs([(one_flow(), [0, 2], 1e6), Job(one_flow(), np.array([1, 2]), 5e5)])
    assert a.duration == pytest.approx(122 * US, rel=1e-12)
    assert b.duration == pytest.approx(82 * US, rel=1e-12)
    assert (a.meta["job"], b.meta["job"]) == (0, 1)
    assert net.clock == pytest.approx(122 * US, rel=1e-12)


def test_two_rings_interfere_on_a_fabric():
    topo = fat_tree(4)
    ring = generate("ring", 8)
    alone = SimulatedNetwork(topo, seed=2).run_jobs([(ring, np.arange(0, 16, 2), 8e6)])[0].duration
    both = SimulatedNetwork(topo, seed=2).run_jobs([(ring, np.arange(0, 16, 2), 8e6),
                                                   (ring, np.arange(1, 16, 2), 8e6)])
    assert all(t.duration > alone for t in both)  # the two jobs share edge and aggregation links
    # on disjoint hosts of one star nothing is shared: identical to running alone
    s = star(16)
    solo = SimulatedNetwork(s).run_jobs([(ring, np.arange(8), 8e6)])[0].duration
    duo = SimulatedNetwork(s).run_jobs([(ring, np.arange(8), 8e6), (ring, np.arange(8, 16), 8e6)])
    assert [t.duration for t in duo] == pytest.approx([solo, solo], rel=1e-12)

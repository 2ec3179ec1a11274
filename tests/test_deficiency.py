"""Ψ, Θ, Ω, S, Q of hand-made schedules on a 4-node ring (SP-allreduce §2.2)."""

import numpy as np
import pytest

from reactccl.cost.deficiency import deficiency, link_loads, min_volume, round_times
from reactccl.pattern import PatternBuilder
from reactccl.topology.torus import TorusGeometry


def star_on_ring():
    """Everyone reduces into 0 (step 0), 0 copies back (step 1), on the ring 0-1-2-3-0."""
    b = PatternBuilder("allreduce", 4)
    c = b.chunk(1.0, 0)
    for r in (1, 2, 3):
        b.flow(0, r, 0, [c], "reduce")
    for r in (1, 2, 3):
        b.flow(1, 0, r, [c], "copy")
    return b.build()


def test_hand_computed_star_on_ring():
    g = TorusGeometry((4,))
    d = deficiency(star_on_ring(), g)
    # 6 transmissions of N: Vol_abs = 6 = V_min; 2 -> 0 and 0 -> 2 take 2 hops: Vol_phys = 8
    assert (d.rounds, d.vol_abs, d.vol_phys) == (2, 6.0, 8.0)
    assert d.psi == pytest.approx(1.0)
    assert d.theta == pytest.approx(8 / 6)
    # link 3->0 carries 2->0 and 3->0 in round 1; link 0->1 carries 0->1 and 0->2 in round 2
    assert d.max_load == (2.0, 2.0)
    assert d.max_hops == (2, 2)
    # mean load per round: 4 link-units over 8 links = 0.5 -> Ω = (2 + 2) / (0.5 + 0.5)
    assert d.omega == pytest.approx(4.0)
    assert d.q == 4.0
    assert d.time(alpha=1e-6, beta=2e-9) == pytest.approx(2e-6 + 8e-9)


def test_link_loads_scale_with_message():
    rounds, loads, hops, flen = link_loads(star_on_ring(), TorusGeometry((4,)), message_bytes=100.0)
    assert rounds.tolist() == [0, 1]
    assert loads.sum() == pytest.approx(800.0)
    assert sorted(flen.tolist()) == [1, 1, 1, 1, 2, 2]


def test_round_times_model():
    d = deficiency(star_on_ring(), TorusGeometry((4,)))
    t = round_times(d, message_bytes=1000, link_rate=8e9, hop_latency=1e-6)
    # 2 hops x 1 us + 2 x 1000 B x 8 / 8e9 = 2 us + 2 us
    assert t.tolist() == pytest.approx([4e-6, 4e-6])
    with pytest.raises(ValueError, match="link_rate"):
        round_times(d, 1, 0, 0)


def test_min_volume_and_size_check():
    assert min_volume("allreduce", 8) == 14.0
    assert min_volume("allgather", 8) == 7.0
    with pytest.raises(ValueError, match="nodes"):
        deficiency(star_on_ring(), TorusGeometry((3,)))

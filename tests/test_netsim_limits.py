"""Header efficiency (payload bytes per wire byte) and sizes refused before any work."""

import subprocess
import sys

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import BackgroundError, IntoRanks, SimulatedCluster, run_simulation
from reactccl.pattern import PatternError
from reactccl.topology import TopologyError, parse_topology, star


def test_header_efficiency_scales_wire_bytes_not_payload():
    # binomial broadcast of 1 GB in step order: 3 sends of S on the root's uplink. With E = 1448/1538
    # each puts S / E bytes on the wire: 3 x (80 ms / E + 2 us); traces keep the payload bytes
    p = generate("binomial-broadcast", 8)
    e = 1448 / 1538
    tr = SimulatedCluster(star(8), np.arange(8), 1e9, header_efficiency=e).run_epoch(p)
    assert tr.duration == pytest.approx(3 * (0.08 / e + 2e-6), rel=1e-12)
    assert tr.flow_bytes.tolist() == [1e9] * 7
    assert tr.algbw == pytest.approx(1e9 / tr.duration)
    res = run_simulation(p, topology="star:hosts=8", size=1e9, epochs=1, header_efficiency=0.5)
    assert res.durations[0] == pytest.approx(3 * (0.16 + 2e-6), rel=1e-12)
    assert res.to_dict()["header_efficiency"] == 0.5
    for bad in (0, 1.5, -1, "x"):
        with pytest.raises(ValueError, match="header_efficiency"):
            SimulatedCluster(star(8), np.arange(8), 1e9, header_efficiency=bad)


@pytest.mark.parametrize("spec, words", [
    ("fat-tree:k=1000", "250,000,000 hosts and 1,500,000,000 directed links"),
    ("star:hosts=1000000000", "1,000,000,000 hosts and 2,000,000,000 directed links"),
    ("torus:100000x100000", "10,000,000,000 hosts and 40,000,000,000 directed links"),
])
def test_huge_topologies_are_refused_with_their_size(spec, words):
    with pytest.raises(TopologyError, match=words):
        parse_topology(spec)


def test_huge_patterns_and_backgrounds_are_refused():
    with pytest.raises(PatternError, match="slices=1000000000: would have 28,000,000,000 flows"):
        generate("nccl-tree", 8, slices=1000000000)
    with pytest.raises(PatternError, match="ring on 1000000 ranks: would have 1,999,998,000,000 flows"):
        generate("ring", 1000000)
    with pytest.raises(BackgroundError, match="1,000,000 long-lived flows"):
        SimulatedCluster(star(16), np.arange(8), 1e6, background=[IntoRanks((3,), 1000000)]).run_epoch(
            generate("ring", 8))


@pytest.mark.parametrize("args, words", [
    (["-t", "fat-tree:k=1000"], "1,500,000,000 directed links"),
    (["-O", "slices=1000000000"], "28,000,000,000 flows"),
    (["-b", "into:3:p=1000000"], "1,000,000 long-lived flows"),
    (["--header-efficiency", "1448/0"], "--header-efficiency"),
])
def test_cli_refuses_before_work(args, words):
    out = subprocess.run([sys.executable, "-m", "reactccl.cli.main", "simulate", "-a", "nccl-tree", "-n", "8", "-e", "1",
                          *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert words in out.stderr.strip().splitlines()[-1] and "Traceback" not in out.stderr

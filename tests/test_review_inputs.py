"""Inputs a newcomer's review found accepted silently: each is refused with
the field named, or read as the user meant."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.experiments.perf import MAX_SIZES, nccl_sizes
from reactccl.netsim import SimulatedCluster
from reactccl.traffic.background import BackgroundError, parse_background
from reactccl.pattern.msccl_common import MscclError
from reactccl.pattern.msccl_export import to_msccl_xml
from reactccl.topology import parse_topology
from reactccl.topology.spec import TopologyError
from reactccl.topology.units import UnitError, parse_rate
from reactccl.tuner import ReactParams, run_react


def test_background_needs_ranks_and_one_value_per_field():
    with pytest.raises(BackgroundError, match="no ranks given"):
        parse_background("into::p=2")
    with pytest.raises(BackgroundError, match="no ranks given"):
        parse_background("out:,:p=1")
    with pytest.raises(BackgroundError, match="'p' given twice"):
        parse_background("into:3:p=2:p=3")
    assert parse_background("into:3,5:p=2").ranks == (3, 5)


def test_one_background_spec_as_text_is_one_spec():
    topo, p = parse_topology("star:hosts=16"), generate("nccl-tree", 8)
    one = SimulatedCluster(topo, np.arange(8), 1e6, background="into:3:p=2").run_epoch(p).duration
    listed = SimulatedCluster(topo, np.arange(8), 1e6, background=["into:3:p=2"]).run_epoch(p).duration
    clean = SimulatedCluster(topo, np.arange(8), 1e6).run_epoch(p).duration
    assert one == listed > clean


def test_rates_in_bytes_are_refused():
    assert parse_rate("100Gbps") == parse_rate("100G") == parse_rate("100gbps") == 1e11
    for text in ("1GB", "1GBps", "30GB", "12.5GB/s"):
        with pytest.raises(UnitError, match="bytes per second"):
            parse_rate(text)


def test_topology_key_given_twice():
    with pytest.raises(TopologyError, match="'k' given twice"):
        parse_topology("fat-tree:k=4:k=6")
    with pytest.raises(TopologyError, match="'rate' given twice"):
        parse_topology("torus:4x4,rate=100G,rate=400G")


def test_react_seed_and_report_window_checked():
    with pytest.raises(ValueError, match="ReactParams.seed"):
        ReactParams(seed=-1)
    assert ReactParams(seed=np.int64(3)).seed == 3
    topo, p = parse_topology("star:hosts=16"), generate("ring", 4)
    res = run_react(SimulatedCluster(topo, np.arange(4), 1e6), p, 3, ReactParams(seed=1))
    assert res.stats(1)["epochs"] == 2
    with pytest.raises(ValueError, match="after must be an epoch index >= 0"):
        res.report(after=-1)


def test_msccl_export_needs_a_channel():
    with pytest.raises(MscclError, match="max_channels"):
        to_msccl_xml(generate("ring", 4), max_channels=0)


def test_perf_sizes_are_refused_past_the_cap_not_cut():
    assert len(nccl_sizes(1, MAX_SIZES, step=1)) == MAX_SIZES
    with pytest.raises(ValueError, match=f"more than {MAX_SIZES:,} sizes; use -i 2 or more"):
        nccl_sizes(1, MAX_SIZES + 1, step=1)

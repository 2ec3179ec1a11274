"""The packet-level executor (reactccl.packetsim): start rules, the reference scenarios, ns-3 runs.

Tests that run ns-3 are marked slow and skipped when the ns3 wheel is not installed
(``pip install 'reactccl[ns3]'``); the rest need no ns-3.
"""

from __future__ import annotations

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.packetsim import (
    PacketSimError, PacketSimUnavailable, available, child_lists, get_transport, start_parents,
)
from reactccl.packetsim import anchors, native
from reactccl.pattern import Collective, CollectivePattern

needs_ns3 = pytest.mark.skipif(not available(), reason="ns-3 not installed (pip install 'reactccl[ns3]')")


def _ring(n: int = 3) -> CollectivePattern:
    return generate("ring", n)


# ----------------------------------------------------------------- no ns-3 needed
def test_data_rule_is_pattern_dependencies():
    p = _ring(4)
    ptr, par = start_parents(p, "data")
    want_ptr, want = p.dependencies()
    assert np.array_equal(ptr, want_ptr) and np.array_equal(par, want)


def test_step_order_rule_adds_previous_step_sends_of_the_same_chunk_graph():
    # two ranks, one chunk graph; rank 0 sends at steps 0 and 2 (chunk 0, then chunk 1), rank 1 at step 1
    p = CollectivePattern.from_arrays(Collective.BROADCAST, 3, [0.5, 0.5], [0, 0], step=[0, 1, 2],
                                      src=[0, 1, 0], dst=[1, 2, 2], op=[1, 1, 1], chunk_ptr=[0, 1, 2, 3],
                                      chunk_idx=[0, 0, 1], root=0, check=False)
    ptr, par = start_parents(p, "data")
    assert [par[ptr[f]:ptr[f + 1]].tolist() for f in range(3)] == [[], [0], []]
    ptr, par = start_parents(p, "step")
    # flow 2 (rank 0, step 2) now waits for rank 0's step-0 send, flow 0
    assert [par[ptr[f]:ptr[f + 1]].tolist() for f in range(3)] == [[], [0], [0]]


def test_unknown_start_rule_is_named():
    with pytest.raises(ValueError, match="start rule 'lockstep'"):
        start_parents(_ring(), "lockstep")


def test_child_lists_invert_parents():
    ptr = np.array([0, 0, 1, 3])
    par = np.array([0, 0, 1])
    waiting, cptr, child = child_lists(ptr, par, 3)
    assert waiting.tolist() == [0, 1, 2]
    assert [child[cptr[f]:cptr[f + 1]].tolist() for f in range(3)] == [[1, 2], [2], []]


def test_transports_by_name():
    assert get_transport("dctcp").red["MinTh"] == 32 and get_transport("dctcp").qdisc == "prio-red"
    assert get_transport("dctcp_red").red["MaxSize"] == "2666p"
    assert get_transport("default").tcp == ""
    with pytest.raises(ValueError, match="known: dctcp, dctcp_red, default"):
        get_transport("reno")


def test_missing_ns3_names_the_extra(monkeypatch):
    monkeypatch.setattr(native, "_loaded", None)
    monkeypatch.setattr(native, "available", lambda: False)
    with pytest.raises(PacketSimUnavailable, match=r"pip install 'reactccl\[ns3\]'"):
        native.load()


def test_anchor_scenarios_shape():
    a = anchors.anchor("react43_a")
    assert len(a.src) == 30 and a.background == ()
    # rank 2's tree-0 flow waits for its children 1 and 3
    f = a.labels.index("T0:2->4")
    assert sorted(a.labels[p] for p in a.parents[f]) == ["T0:1->2", "T0:3->2"]
    c = anchors.anchor("react43_c")
    assert {"T1:1->2", "T1:2->7", "T1:3->1", "T1:5->2"} <= set(c.labels)
    assert len(anchors.anchor("ring8").src) == 112 and len(anchors.anchor("incast").src) == 7
    with pytest.raises(KeyError, match="known: react43_a"):
        anchors.anchor("nope")


@pytest.mark.parametrize("name", list(anchors.ANCHORS))
def test_fluid_engine_matches_the_references_fluid_times(name):
    ref = anchors.reference()["scenarios"][name]["fluid_maxmin_us"]
    assert anchors.run_fluid(name)["time_s"] * 1e6 == pytest.approx(ref, abs=1e-6)


# ------------------------------------------------------------------------ ns-3
@needs_ns3
@pytest.mark.slow
@pytest.mark.parametrize("transport", ["default", "dctcp_red"])
def test_reference_scenarios_within_3_percent(transport):
    ref = anchors.reference()["scenarios"]
    for name in anchors.ANCHORS:
        got = anchors.run_packet(name, transport)["time_s"] * 1e6
        want = ref[name]["ns3_us"][transport]
        assert got == pytest.approx(want, rel=0.03), f"{name} {transport}: {got:.3f} µs vs {want:.3f} µs"


@needs_ns3
@pytest.mark.slow
def test_per_flow_times_of_the_dctcp_reference():
    ref = anchors.reference()["scenarios"]["react43_b"]["dctcp_red_fct_us_by_flow"]
    got = anchors.run_packet("react43_b", "dctcp_red")["fct_s"]
    for label, us in ref.items():
        assert got[label] * 1e6 == pytest.approx(us, rel=0.03), label


@needs_ns3
@pytest.mark.slow
def test_epochs_reuse_connections_and_follow_dependencies():
    from reactccl.packetsim import PacketCluster
    from reactccl.topology import parse_topology

    topo = parse_topology("fat-tree:k=4")
    pat = generate("nccl-tree", 8)
    c = PacketCluster(topo, list(range(8)), 2e6, background=["into:3:p=1"], seed=1, transport="dctcp")
    traces = [c.run_epoch(pat) for _ in range(3)]
    # 4 connections per flow, opened once, plus the background flow
    assert [t.meta["connections"] for t in traces] == [4 * pat.num_flows + 1] * 3
    ptr, par = pat.dependencies()
    for tr in traces:
        assert tr.duration > 0 and np.all(tr.end > tr.start)
        for f in range(pat.num_flows):  # a flow starts the instant its last dependency is delivered
            deps = par[ptr[f]:ptr[f + 1]]
            assert tr.start[f] == (tr.end[deps].max() if len(deps) else 0.0)
        # each flow took the ECMP path netsim would give it for the drawn port
        for f in range(pat.num_flows):
            key = (0, f, int(tr.meta["ports"][f]))
            assert np.array_equal(tr.paths[f], topo.ecmp_path(tr.meta["src_host"][f], tr.meta["dst_host"][f], key))
        # never faster than the header-free fluid bound of the same epoch
        assert tr.duration >= 4 * 1e6 / 100e9


@needs_ns3
@pytest.mark.slow
def test_time_limit_names_the_flows_left():
    from reactccl.packetsim import PacketCluster
    from reactccl.topology import star

    c = PacketCluster(star(4), [0, 1, 2], 20e6, transport="default", time_limit=50e-6)
    with pytest.raises(PacketSimError, match=r"not delivered within 5e-05 s of simulated time: job 0 flow"):
        c.run_epoch(_ring(3))
    with pytest.raises(PacketSimError, match="destroyed"):
        from reactccl.packetsim import PacketNetwork
        old = c.network
        PacketNetwork(star(2), "default")
        old.run_jobs([(_ring(2), [0, 1], 1e6)])

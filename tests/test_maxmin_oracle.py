"""The from-scratch oracle (``tests/maxmin_oracle.py``) on hand-computed cases, and on the
textbook characterisation of max-min fairness in exact arithmetic; then the engines against it."""

from fractions import Fraction as Fr

import numpy as np
import pytest
from maxmin_oracle import Case, case_of, progressive_filling, simulate

from reactccl.netsim import CompiledEngine, FluidEngine


def test_three_flows_on_two_links():
    """A crosses links 0 and 1, B only 0, C only 1; capacities 10 and 4: link 1 fills at 2 (A and C),
    then link 0 at 10 - 2 = 8 (B)."""
    assert progressive_filling([(0, 1), (0,), (1,)], [Fr(10), Fr(4)]) == [2, 8, 2]


def test_equal_links_split_in_halves():
    assert progressive_filling([(0, 1), (0,), (1,)], [Fr(1), Fr(1)]) == [Fr(1, 2)] * 3


def test_parking_lot():
    """One flow across 4 links of capacity 6, and one more flow on each link, a second one on link 2:
    link 2 fills first at 6/3 = 2 (the long flow and link 2's two), then every other link gives its
    single flow 6 - 2 = 4."""
    paths = [(0, 1, 2, 3), (0,), (1,), (2,), (2,), (3,)]
    assert progressive_filling(paths, [Fr(6)] * 4) == [2, 4, 4, 2, 2, 4]


def test_three_levels_and_a_slack_link():
    """Link 0 (3) has A, B, C; link 1 (10) has C, D; link 2 (7) has D, E; link 3 (100) has E only.
    Level 1: link 0 at 1 (A, B, C). Link 1 then offers 9 to D, link 2 offers 3.5 to D and E: link 2
    fills at 3.5. Link 1 (C + D = 4.5 < 10) and link 3 stay slack."""
    paths = [(0,), (0,), (0, 1), (1, 2), (2, 3)]
    assert progressive_filling(paths, [Fr(3), Fr(10), Fr(7), Fr(100)]) == [1, 1, 1, Fr(7, 2), Fr(7, 2)]


def test_a_flow_alone_gets_its_smallest_capacity():
    assert progressive_filling([(2, 0, 1)], [Fr(5), Fr(9), Fr(7)]) == [5]
    assert progressive_filling([], [Fr(1)]) == []


@pytest.mark.parametrize("paths, cap, match", [
    ([()], [1.0], "flow 0: empty path"),
    ([(0,), (1, 1)], [1.0, 1.0], "flow 1: path \\[1, 1\\] repeats a link"),
    ([(0,), (0, 1)], [1.0, 0.0], "flow 1: link 1 has capacity 0"),
])
def test_bad_input_is_named(paths, cap, match):
    with pytest.raises(ValueError, match=match):
        progressive_filling(paths, cap)


@pytest.mark.parametrize("seed", range(30))
def test_progressive_filling_is_max_min_fair(seed):
    """Bertsekas & Gallager §6.5.2: a feasible allocation is max-min fair iff every flow crosses a
    saturated link on which no flow gets more. Checked exactly (Fractions) on random instances."""
    rng = np.random.default_rng(seed)
    L, F = int(rng.integers(1, 8)), int(rng.integers(1, 16))
    cap = [Fr(int(c)) for c in rng.integers(1, 13, size=L)]
    paths = [tuple(rng.choice(L, size=int(rng.integers(1, L + 1)), replace=False).tolist()) for _ in range(F)]
    rate = progressive_filling(paths, cap)
    load = [sum((rate[f] for f in range(F) if k in paths[f]), Fr(0)) for k in range(L)]
    assert all(load[k] <= cap[k] for k in range(L))
    for f in range(F):
        assert rate[f] > 0
        assert any(load[k] == cap[k] and all(rate[g] <= rate[f] for g in range(F) if k in paths[g])
                   for k in paths[f]), f"flow {f} has no bottleneck"


def _two_flows(**extra) -> Case:
    """A (1 MB) and B (2 MB) share a 1 Gbit/s link from time 0, 1 µs of latency each (``extra``
    replaces fields)."""
    base = {"capacity": np.array([1e9, 1e9]), "paths": [(0,), (0,)], "bytes_": [1e6, 2e6], "latency": [1e-6, 1e-6],
            "waiting": [0, 0], "children": [[], []], "sent_children": [[], []], "release": [0.0, 0.0],
            "watched": [True, True]}
    return Case(**{**base, **extra})


def test_simulate_two_flows_share_then_one_speeds_up():
    """A sends 8 Mbit at 0.5 Gbit/s: its last byte leaves at 16 ms; B has then 8 Mbit left at
    1 Gbit/s: 24 ms. Each arrives 1 µs later. Events: 2 releases, 2 send ends, 2 arrivals."""
    run = simulate(_two_flows())
    assert run.send_end == pytest.approx([16e-3, 24e-3], rel=1e-15)
    assert run.end == pytest.approx([16.001e-3, 24.001e-3], rel=1e-15)
    assert (run.events, run.time) == (6, pytest.approx(24.001e-3, rel=1e-15))


def test_simulate_start_rules():
    """C (0.5 MB, link 1) waits on A's arrival: starts at 16.001 ms, alone on link 1: sends 4 Mbit at
    1 Gbit/s, ends sending at 20.001 ms. D (0.25 MB, link 0) waits on A's send end (step order):
    starts at 16 ms and shares link 0 with B (B has 8 Mbit left, D 2 Mbit): D's last byte at
    16 + 4 = 20 ms, B's 4 Mbit left at 20 ms go at full rate until 24 ms + 2 ms = 26 ms. E (1 kB,
    link 1) waits on a join of B's and C's arrivals: starts at 26.001 ms."""
    case = _two_flows(paths=[(0,), (0,), (1,), (0,), (1,)], bytes_=[1e6, 2e6, 0.5e6, 0.25e6, 1e3],
                      latency=[1e-6] * 5, waiting=[0, 0, 1, 1, 1], release=[0.0, 0.0] + [np.inf] * 3,
                      watched=[True] * 5,
                      children=[[2], [~0], [~0], [], []],           # A -> C; B and C -> join 0
                      sent_children=[[3], [], [], [], []],          # A's send end -> D
                      join_waiting=[2], join_children=[[4]])        # join 0 -> E
    run = simulate(case)
    assert run.start == pytest.approx([0, 0, 16.001e-3, 16e-3, 26.001e-3], rel=1e-14)
    assert run.send_end == pytest.approx([16e-3, 26e-3, 20.001e-3, 20e-3, 26.001e-3 + 8e-6], rel=1e-14)
    assert run.events == 2 + 2 * 5      # releases of A and B; a send end and an arrival per flow


def test_simulate_periodic_source():
    """A source emits 1 kB (8 kbit) every 40 µs from t = 0 on link 0 (1 Gbit/s); W (2 kB) starts there at
    0 too. Both at 0.5 Gbit/s until the burst's last byte leaves at 16 µs (it arrives then: no
    latency); W sends its last 8 kbit alone by 24 µs and arrives 1 µs later. The next burst (40 µs) is
    never emitted. Events: W's release, the emission, two send ends, two arrivals."""
    case = Case(capacity=np.array([1e9]), paths=[(0,)], bytes_=[2e3], latency=[1e-6], waiting=[0],
                children=[[]], sent_children=[[]], release=[0.0], watched=[True],
                periodic=[((0,), 1e3, 0.0, 0.0, 40e-6)])
    run = simulate(case)
    assert run.start == pytest.approx([0.0, 0.0], abs=1e-18)
    assert run.send_end == pytest.approx([24e-6, 16e-6], rel=1e-14)
    assert run.end == pytest.approx([25e-6, 16e-6], rel=1e-14)
    assert (run.events, run.batches) == (6, 4)      # batches at 0, 16, 24 and 25 µs


@pytest.mark.parametrize("coalesce, c_start", [(1e-12, 8e-3), (0.0, 8e-3 * (1 + 5e-13))])
def test_simulate_coalesces_events_as_the_engines(coalesce, c_start):
    """A (1 MB, link 0) and A2 (1 MB x (1 + 5e-13), link 1) end sending 5e-13 apart, relative; C waits on
    both arrivals (no latency). Within the 1e-12 window both are one batch at A's time, so C starts at
    8 ms exactly; without coalescing it starts at A2's own time."""
    case = Case(capacity=np.array([1e9, 1e9]), paths=[(0,), (1,), (0,)], bytes_=[1e6, 1e6 * (1 + 5e-13), 1e3],
                latency=[0.0] * 3, waiting=[0, 0, 2], children=[[2], [2], []], sent_children=[[], [], []],
                release=[0.0, 0.0, np.inf], watched=[True] * 3)
    run = simulate(case, coalesce=coalesce)
    assert run.start[2] == pytest.approx(c_start, rel=1e-15, abs=0.0)
    assert run.start[2] != pytest.approx(8e-3 * (1 + 5e-13) if coalesce else 8e-3, rel=1e-15, abs=0.0)
    for E in (FluidEngine, CompiledEngine):
        eng = case.build(E, coalesce=coalesce)
        eng.run()
        assert eng.start[2] == pytest.approx(c_start, rel=1e-15, abs=0.0)


def test_simulate_refuses_a_cycle():
    case = _two_flows(waiting=[1, 1], release=[np.inf, np.inf], children=[[1], [0]])
    with pytest.raises(RuntimeError, match="2 watched flows can never finish"):
        simulate(case)


def test_case_round_trip_through_an_engine():
    """case_of reads back what build added: same flows, joins, sources and bursts."""
    case = _two_flows(periodic=[((1,), 1e3, 2e-6, 5e-6, 1e-5)], join_waiting=[1], join_children=[[1]],
                      waiting=[0, 1], children=[[~0], []], release=[0.0, np.inf])
    eng = case.build(FluidEngine)
    eng.add_burst(0, [1], 500.0, 2e-6)
    again = case_of(eng)
    assert again.paths == [(0,), (0,), (1,)] and again.bursts == [(2, 0)]
    assert again.join_waiting == [1] and again.join_children == [[1]] and again.children[:2] == [[~0], []]
    assert again.periodic == [((1,), 1e3, 2e-6, 5e-6, 1e-5)]
    assert again.bytes_ == [1e6, 2e6, 500.0] and again.release == [0.0, np.inf, 0.0]


@pytest.mark.parametrize("seed", range(40))
def test_engines_follow_the_oracle_on_random_graphs(seed):
    """The random dependency graphs of ``test_netsim_compiled`` (joins, send-end children, background
    and periodic flows): the oracle's run and both engines' end to 1e-9 with the same event count."""
    from test_netsim_compiled import build, random_case

    graph = random_case(seed)
    ref = build(FluidEngine, graph)
    case = case_of(ref)
    run = simulate(case)
    F = len(graph[1])
    for eng in (ref, build(CompiledEngine, graph)):
        eng.run()
        assert np.allclose(np.asarray(eng.end[:F]), run.end[:F], rtol=1e-9, atol=0.0)
        assert eng.events == run.events

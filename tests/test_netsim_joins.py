"""Join graphs: the simulator's compact form of ``pattern.dependencies()``."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.torus_common import pack
from reactccl.netsim import FluidEngine, SimulationError
from reactccl.netsim.joins import join_graph
from reactccl.pattern import PatternBuilder


def expand(jg, F):
    """Per flow, the set of flows whose arrivals its start waits for, read back from the joins."""
    inputs = {}  # join -> flows and joins feeding it
    for f in range(F):
        for c in jg.flow_child[jg.flow_child_ptr[f]:jg.flow_child_ptr[f + 1]].tolist():
            inputs.setdefault(~c, []).append(f)
    waits = [[] for _ in range(F)]
    for j in range(jg.num_joins):
        for c in jg.join_child[jg.join_child_ptr[j]:jg.join_child_ptr[j + 1]].tolist():
            if c >= 0:
                waits[c].append(j)
            else:
                inputs.setdefault(~c, []).append(~j)
    memo = {}

    def flows_of(j):
        if j not in memo:
            out = set()
            for x in inputs.get(j, []):
                out |= {x} if x >= 0 else flows_of(~x)
            memo[j] = out
        return memo[j]

    assert [len(w) for w in waits] == jg.flow_waiting.tolist()
    assert [len(inputs.get(j, [])) for j in range(jg.num_joins)] == jg.join_waiting.tolist()
    return [set().union(*(flows_of(j) for j in w)) if w else set() for w in waits]


@pytest.mark.parametrize("name,opts,packed", [
    ("ring", {}, False), ("nccl-tree", {}, False), ("rabenseifner", {}, False), ("rd-allreduce", {}, True),
    ("sp-spineleaf", {"q": 4}, True), ("sp-allreduce", {"shape": (4, 4)}, True), ("bucket", {"shape": (4, 4)}, True),
    ("swing-b", {"shape": (4, 4)}, False)])
def test_joins_wait_for_exactly_the_dependencies(name, opts, packed):
    pat = generate(name, 16, check=False, **opts)
    pat = pack(pat) if packed else pat
    ptr, dep = pat.dependencies()
    got = expand(join_graph(pat, order="data"), pat.num_flows)
    assert got == [set(dep[ptr[f]:ptr[f + 1]].tolist()) for f in range(pat.num_flows)]


def test_join_graph_is_linear_where_dependencies_are_quadratic():
    # SP on a 4-leaf x 4-host spine-leaf: each of the 240 broadcast flows waits on the 15 flows into
    # its sender (3600 dependencies). Joins: one per (receiver, chunk, step): 16 for step 0 (rank r
    # gets chunk r), 240 for step 1; one edge out of every flow (480), one into each broadcast (240)
    pat = pack(generate("sp-spineleaf", 16, q=4))
    jg = join_graph(pat, order="data")
    assert len(pat.dependencies()[1]) == 240 * 15
    assert jg.num_joins == 16 + 240 and len(jg.flow_child) == 480 and len(jg.join_child) == 240
    assert sorted(set(jg.flow_waiting.tolist())) == [0, 1]


def test_engine_join_fires_at_its_last_input():
    # flows 0 (1 Gbit on link 0) and 1 (2 Gbit on link 1) feed a join that releases flow 2 at 2 s
    eng = FluidEngine(np.array([1e9, 1e9, 1e9]))
    eng.add_joins([2], [[2]])
    eng.add_flows([[0], [1], [2]], [1e9 / 8, 2e9 / 8, 1e9 / 8], [0.0, 0.0, 0.0], [0, 0, 1], [[~0], [~0], []],
                  [0.0, 0.0, float("inf")], watched=True)
    assert eng.run() == pytest.approx(3.0)
    assert eng.start == pytest.approx([0.0, 0.0, 2.0])


def test_engine_rejects_a_join_with_no_input():
    with pytest.raises(SimulationError, match="join 0: waits on 0 inputs"):
        FluidEngine(np.ones(1)).add_joins([0], [[]])


def test_empty_pattern_has_no_joins():
    b = PatternBuilder("allreduce", 1)
    b.chunk(1.0, graph=0)
    jg = join_graph(b.build())
    assert (jg.num_joins, jg.flow_child_ptr.tolist(), jg.join_child_ptr.tolist()) == (0, [0], [0])


def test_step_order_joins_follow_the_previous_sending_step():
    # binomial broadcast on 8 ranks: the root sends 0->4, 0->2, 0->1 in steps 0, 1, 2; in step order
    # each waits on one join fed by the send end of the root's previous step, and the data joins
    # are those of order="data"
    pat = generate("binomial-broadcast", 8)
    data, step = join_graph(pat, order="data"), join_graph(pat, order="step")
    root = np.flatnonzero(pat.src == 0)
    assert pat.step[root].tolist() == [0, 1, 2]
    from reactccl.pattern.order import send_groups
    sg = send_groups(pat)
    J = data.num_joins
    assert step.num_joins == J + sg.num_groups
    assert (step.flow_waiting - data.flow_waiting).tolist() == (sg.prev[sg.group] >= 0).astype(int).tolist()
    # the root's step-0 send feeds its group's join, which releases the step-1 send
    j = ~int(step.flow_sent[root[0]])
    assert step.join_child[step.join_child_ptr[j]:step.join_child_ptr[j + 1]].tolist() == [int(root[1])]
    assert sg.predecessors(int(root[2])).tolist() == [int(root[1])]
    with pytest.raises(ValueError, match="order: expected one of step, data"):
        join_graph(pat, order="lockstep")

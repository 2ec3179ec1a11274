"""The α-β cost model: REACT §4.3 by hand, lock-step closed forms, sharing rules, input errors."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.cost import alpha_beta_schedule, hockney_step_times, hockney_time
from reactccl.trace import EpochTrace

ALPHA, BETA, S = 4e-6, 8e-11, 2e6        # 4 µs, 1/(100 Gbit/s) in s/byte, 2 MB (10^6 bytes each)


def reduce_phase(pattern, **ext):
    sched = alpha_beta_schedule(pattern, S, ALPHA, BETA, **ext)
    return sched.end[pattern.op == 0].max()


def test_react_4_3_no_congestion():
    p = generate("nccl-tree", 16)
    # (2 + 2 + 2 + 1) * beta * s/2 + 4 alpha
    assert reduce_phase(p) == pytest.approx(4 * ALPHA + 3.5 * BETA * S, rel=1e-12)
    assert reduce_phase(p) == pytest.approx(576e-6, rel=1e-12)


def test_react_4_3_congestion_and_swap():
    p = generate("nccl-tree", 16)
    assert reduce_phase(p, external_in={3: 2}) == pytest.approx(656e-6, rel=1e-12)
    assert reduce_phase(p, external_in={3: 2}) == pytest.approx(4 * ALPHA + 4 * BETA * S, rel=1e-12)
    # the tree in which 3 is interior: the one where 3 receives during the reduce
    interior = [g for g in (0, 1) if ((p.dst == 3) & (p.op == 0) & (p.flow_graph == g)).any()]
    assert interior == [1]
    perm = np.arange(16)
    perm[[2, 3]] = [3, 2]
    q = p.relabel(perm, graph=interior[0])
    assert reduce_phase(q, external_in={3: 2}) == pytest.approx(576e-6, rel=1e-12)


@pytest.mark.parametrize("p_ext", [1, 2, 4, 6])
def test_react_4_3_footnote_closed_form(p_ext):
    # footnote 2: 4 alpha + (2 + (p+2) + 1 + 1) beta s/2, never below the uncongested time
    want = 4 * ALPHA + max(3 + p_ext / 2, 3.5) * BETA * S
    p = generate("nccl-tree", 16)
    assert reduce_phase(p, external_in=[p_ext if r == 3 else 0 for r in range(16)]) == \
        pytest.approx(want, rel=1e-12)


def test_tree_lockstep_steps():
    p = generate("nccl-tree", 16)
    full, half = ALPHA + BETA * S, ALPHA + BETA * S / 2
    assert hockney_step_times(p, S, ALPHA, BETA) == pytest.approx([full, full, full, half,
                                                                    half, full, full, full])
    assert hockney_time(p, S, ALPHA, BETA) == pytest.approx(8 * ALPHA + 7 * BETA * S)


@pytest.mark.parametrize("n", [2, 3, 8, 13])
def test_ring_allreduce_closed_form(n):
    p = generate("ring", n)
    want = 2 * (n - 1) * (ALPHA + BETA * S / n)
    assert hockney_time(p, S, ALPHA, BETA) == pytest.approx(want, rel=1e-12)
    # one flow per link at any time: the data-driven schedule equals the lock-step one
    sched = alpha_beta_schedule(p, S, ALPHA, BETA)
    assert sched.completion == pytest.approx(want, rel=1e-12)
    assert np.allclose(sched.end - sched.start, ALPHA + BETA * S / n)


def test_recursive_doubling_closed_form():
    # (n-1)/n of the message over log2 n steps: log2 n alpha + (n-1)/n beta S
    p = generate("recursive-doubling", 8)
    want = 3 * ALPHA + 7 / 8 * BETA * S
    assert hockney_time(p, S, ALPHA, BETA) == pytest.approx(want)
    assert alpha_beta_schedule(p, S, ALPHA, BETA).completion == pytest.approx(want)


def test_binomial_broadcast_root_link_is_shared():
    # order="data": the root's three sends need nothing, so they start together and share its link:
    # 0->4, 0->2, 0->1 end at 3 beta S + alpha; then 4->6, 4->5 share (2 beta S); 6->7 last
    p = generate("binomial-broadcast", 8)
    sched = alpha_beta_schedule(p, S, ALPHA, BETA, order="data")
    assert sched.completion == pytest.approx(3 * ALPHA + 6 * BETA * S)
    f = int(np.flatnonzero((p.src == 0) & (p.dst == 1))[0])
    assert (sched.start[f], sched.end[f]) == pytest.approx((0.0, ALPHA + 3 * BETA * S))
    # lock-step it is log2 n messages of S
    assert hockney_time(p, S, ALPHA, BETA) == pytest.approx(3 * (ALPHA + BETA * S))


def test_binomial_broadcast_in_step_order():
    # step order (the default): the root sends 0->4, 0->2, 0->1 one after another (beta S each);
    # 4 gets its copy at beta S + alpha and sends 4->6 then 4->5; 6 sends 6->7 at 2 beta S + 2 alpha.
    # The last arrival is at 3 (alpha + beta S), the lock-step Hockney time.
    p = generate("binomial-broadcast", 8)
    sched = alpha_beta_schedule(p, S, ALPHA, BETA)
    assert sched.completion == pytest.approx(3 * (ALPHA + BETA * S), rel=1e-12)
    f = int(np.flatnonzero((p.src == 0) & (p.dst == 1))[0])
    assert (sched.start[f], sched.end[f]) == pytest.approx((2 * BETA * S, ALPHA + 3 * BETA * S), rel=1e-12)
    g = int(np.flatnonzero((p.src == 4) & (p.dst == 5))[0])
    assert sched.start[g] == pytest.approx(2 * BETA * S + ALPHA, rel=1e-12)


def test_order_must_be_known():
    with pytest.raises(ValueError, match="order: expected one of step, data"):
        alpha_beta_schedule(generate("ring", 4), S, ALPHA, BETA, order="lockstep")


def test_external_flows_take_equal_shares():
    p = generate("binomial-reduce", 2)                        # one flow 1 -> 0 of S bytes
    assert alpha_beta_schedule(p, S, ALPHA, BETA).completion == pytest.approx(ALPHA + BETA * S)
    assert alpha_beta_schedule(p, S, ALPHA, BETA, external_out={1: 1}).completion == \
        pytest.approx(ALPHA + 2 * BETA * S)
    assert alpha_beta_schedule(p, S, ALPHA, BETA, external_out={1: 1}, external_in={0: 3}).completion == \
        pytest.approx(ALPHA + 4 * BETA * S)


def test_shares_recomputed_when_flows_start_and_finish():
    # 2-rank tree, S/2 = 10^6 bytes per flow, one external flow out of rank 0; 1/beta = 12.5e9 B/s.
    # 1->0 (tree 0 reduce) alone: ends 80 us, arrives 84. 0->1 (tree 1 reduce) shares rank 0 with
    # the external flow: 525,000 B by 84 us; then tree 0's broadcast 0->1 starts and rank 0 is
    # shared three ways: the reduce ends after 475,000 B more at 84 + 114 = 198 us. The broadcast
    # has 475,000 B out by then, the rest at a half share takes 84 us: ends 282, arrives 286 us.
    p = generate("nccl-tree", 2)
    sched = alpha_beta_schedule(p, S, ALPHA, BETA, external_out={0: 1})
    bcast0 = int(np.flatnonzero((p.src == 0) & (p.op == 1))[0])
    red1 = int(np.flatnonzero((p.src == 0) & (p.op == 0))[0])
    assert sched.last_byte[red1] == pytest.approx(198e-6)
    assert (sched.start[bcast0], sched.end[bcast0]) == pytest.approx((84e-6, 286e-6))
    assert sched.completion == pytest.approx(286e-6)


def test_zero_bytes_and_no_flows():
    p = generate("nccl-tree", 16)
    assert alpha_beta_schedule(p, 0, ALPHA, BETA).completion == pytest.approx(8 * ALPHA)
    assert alpha_beta_schedule(p, S, 0, 0).completion == 0.0
    one = generate("ring", 1)
    assert alpha_beta_schedule(one, S, ALPHA, BETA).completion == 0.0
    assert hockney_time(one, S, ALPHA, BETA) == 0.0


def test_to_trace():
    p = generate("ring", 4)
    sched = alpha_beta_schedule(p, S, ALPHA, BETA)
    tr = sched.to_trace(p, S)
    assert isinstance(tr, EpochTrace)
    assert tr.duration == sched.completion
    assert np.allclose(tr.flow_bytes, S / 4)
    assert tr.algbw == pytest.approx(S / sched.completion)


@pytest.mark.parametrize("kwargs, match", [
    (dict(alpha=-1.0), "alpha"), (dict(beta=float("inf")), "beta"), (dict(message_bytes=-5), "message_bytes"),
    (dict(external_in={16: 1}), "external_in: rank 16"), (dict(external_out=[1, 2]), "external_out"),
    (dict(external_in={3: -1}), "external_in: rank 3"),
])
def test_bad_inputs(kwargs, match):
    args = dict(message_bytes=S, alpha=ALPHA, beta=BETA)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        alpha_beta_schedule(generate("nccl-tree", 16), **args)

"""Exact, count-based verification."""

import numpy as np
import pytest

from reactccl.pattern import CollectivePattern, PatternBuilder, VerificationError, verify


def ring_allreduce(n: int) -> CollectivePattern:
    b = PatternBuilder("allreduce", n, name="ring")
    for c in range(n):
        b.chunk(1 / n, graph=c)
    for t in range(n - 1):
        for i in range(n):
            b.flow(t, i, (i + 1) % n, [(i - 1 - t) % n], "reduce")
    for t in range(n - 1):
        for i in range(n):
            b.flow(n - 1 + t, i, (i + 1) % n, [(i - t) % n], "copy")
    return b.build()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
def test_ring_allreduce_verifies(n):
    r = verify(ring_allreduce(n))
    assert (r.num_ranks, r.num_flows) == (n, 2 * (n - 1) * n)


def test_double_counting_is_rejected():
    p = ring_allreduce(4)
    # turn the allgather copies into reduces: every final value is counted twice
    q = p.replace(op=np.zeros(p.num_flows, dtype=np.int8))
    with pytest.raises(VerificationError, match="counted twice") as e:
        verify(q)
    assert e.value.step is not None and e.value.rank is not None and e.value.chunk is not None


def test_missing_contribution_is_rejected_with_place():
    p = ring_allreduce(4)
    keep = np.ones(p.num_flows, bool)
    keep[0] = False  # step 0 flow 0->1 of chunk 3
    b = PatternBuilder("allreduce", 4)
    for c in range(4):
        b.chunk(0.25, c)
    for i in np.flatnonzero(keep):
        f = p.flow(int(i))
        b.flow(f.step, f.src, f.dst, f.chunks, f.op)
    with pytest.raises(VerificationError, match="contribution of rank 0 missing") as e:
        verify(b.build())
    assert e.value.chunk == 3


def test_sending_what_source_does_not_hold():
    b = PatternBuilder("allgather", 3)
    for c in range(3):
        b.chunk(1 / 3, 0)
    b.flow(0, 1, 2, [0], "copy")  # chunk 0 is rank 0's block; rank 1 does not hold it
    with pytest.raises(VerificationError, match="rank 1 does not hold it yet") as e:
        verify(b.build())
    assert (e.value.rank, e.value.chunk, e.value.step) == (1, 0, 0)


def test_same_step_read_uses_previous_state():
    # 0->1 and 1->2 in the same step: 2 must NOT get 0's data through 1
    b = PatternBuilder("broadcast", 3, root=0)
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 1, [c], "copy")
    b.flow(1, 1, 2, [c], "copy")
    verify(b.build())
    b2 = PatternBuilder("broadcast", 3, root=0)
    c = b2.chunk(1.0, 0)
    b2.flow(0, 0, 1, [c], "copy")
    b2.flow(0, 0, 2, [c], "copy")
    verify(b2.build())
    b3 = PatternBuilder("broadcast", 3, root=0)
    c = b3.chunk(1.0, 0)
    b3.flow(0, 0, 1, [c], "copy")
    b3.flow(0, 1, 2, [c], "copy")
    with pytest.raises(VerificationError, match="does not hold it yet"):
        verify(b3.build())


def test_conflicting_copy_in_one_step():
    b = PatternBuilder("allreduce", 3)
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 2, [c]); b.flow(0, 1, 2, [c], "copy")
    with pytest.raises(VerificationError, match="one of them is a copy"):
        verify(b.build())


def test_two_reduces_in_one_step_add_up():
    # 3-rank tree: 0 and 2 reduce into 1 at step 0, 1 copies back at step 1
    b = PatternBuilder("allreduce", 3)
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 1, [c]); b.flow(0, 2, 1, [c])
    b.flow(1, 1, 0, [c], "copy"); b.flow(1, 1, 2, [c], "copy")
    verify(b.build())


def test_reducescatter_reduce_and_broadcast_targets():
    n = 3
    rs = PatternBuilder("reducescatter", n)
    for c in range(n):
        rs.chunk(1 / n, c)
    for t in range(n - 1):
        for i in range(n):
            rs.flow(t, i, (i + 1) % n, [(i - 1 - t) % n])
    verify(rs.build())
    red = PatternBuilder("reduce", 3, root=2)
    c = red.chunk(1.0, 0)
    red.flow(0, 0, 1, [c]); red.flow(1, 1, 2, [c])
    verify(red.build())
    red_bad = PatternBuilder("reduce", 3, root=0)
    c = red_bad.chunk(1.0, 0)
    red_bad.flow(0, 0, 1, [c]); red_bad.flow(1, 1, 2, [c])
    with pytest.raises(VerificationError, match="rank 0, chunk 0: contribution of ranks 1, 2 missing"):
        verify(red_bad.build())


def test_allgather_extra_data_and_large_rank_ids():
    # 70 ranks exercise the second uint64 word of the bit planes
    n = 70
    b = PatternBuilder("allgather", n)
    for c in range(n):
        b.chunk(1 / n, 0)
    for t in range(n - 1):
        for i in range(n):
            b.flow(t, i, (i + 1) % n, [(i - t) % n], "copy")
    verify(b.build())


def test_reduce_into_an_undefined_value_is_rejected_naming_flow_step_rank_chunk():
    # ring AllGather with reduces: rank 1 does not hold chunk 0 (rank 0's block) before step 0
    from reactccl.algorithms import generate
    p = generate("ring-allgather", 4)
    bad = p.replace(op=np.zeros(p.num_flows, dtype=np.int8))
    with pytest.raises(VerificationError, match=r"step 0: flow \d+ \(0->1\) reduces chunk 0 into rank 1, whose "
                                                r"value there is undefined") as e:
        verify(bad)
    f = e.value.flow
    assert (e.value.step, e.value.rank, e.value.chunk) == (0, 1, 0)
    assert (p.step[f], p.src[f], p.dst[f]) == (0, 0, 1) and e.value.reason == "reduce into an undefined value"
    # Broadcast: only the root holds anything before the first write
    b = PatternBuilder("broadcast", 3, root=2)
    c = b.chunk(1.0, 0)
    b.flow(0, 2, 0, [c], "copy")
    b.flow(1, 2, 1, [c], "reduce")
    with pytest.raises(VerificationError, match="step 1: flow 1 \\(2->1\\) reduces chunk 0 into rank 1") as e:
        verify(b.build())
    assert (e.value.flow, e.value.step, e.value.rank, e.value.chunk) == (1, 1, 1, 0)


def test_a_copy_defines_the_value_a_later_reduce_adds_to():
    # AllGather on 2 ranks by copies verifies; a later reduce into the (now defined) value is
    # allowed by the step rules and double counts, which the final check names
    b = PatternBuilder("allgather", 2)
    c0, c1 = b.chunk(0.5, 0), b.chunk(0.5, 0)
    b.flow(0, 0, 1, [c0], "copy")
    b.flow(0, 1, 0, [c1], "copy")
    verify(b.build())
    b.flow(1, 0, 1, [c0], "reduce")
    with pytest.raises(VerificationError, match="rank 1, chunk 0: contribution of rank 0 counted twice"):
        verify(b.build())


def test_several_reduces_into_an_undefined_value_in_one_step_are_rejected():
    b = PatternBuilder("allgather", 3)
    for _ in range(3):
        b.chunk(1 / 3, 0)
    b.flow(0, 0, 2, [0], "reduce")
    b.flow(0, 1, 2, [1], "copy")
    with pytest.raises(VerificationError, match="flow 0 \\(0->2\\) reduces chunk 0 into rank 2"):
        verify(b.build())


def test_send_of_an_undefined_value_names_the_flow():
    b = PatternBuilder("broadcast", 3, root=0)
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 1, [c], "copy")
    b.flow(0, 2, 1, [c], "copy")
    with pytest.raises(VerificationError, match="step 0: flow 1 \\(2->1\\) sends chunk 0 but rank 2 does not hold") as e:
        verify(b.build())
    assert (e.value.flow, e.value.rank, e.value.step) == (1, 2, 0)

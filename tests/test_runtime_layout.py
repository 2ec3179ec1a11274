"""Element layout and per-rank plans of the real runtime (numpy only, no processes)."""

import numpy as np
import pytest

from reactccl.pattern import PatternBuilder
from reactccl.runtime import assemble_trace, block_bounds, chunk_bounds, local_plan, merge_traces
from reactccl.runtime.layout import RECV, SEND
from reactccl.runtime.records import LocalRecord
from runtime_patterns import copy_after_reduce


def equal_chunks(collective, n, c, root=None):
    b = PatternBuilder(collective, n, root=root)
    b.chunks([1 / c] * c, [0] * c)
    return b.build()


def test_chunk_bounds_round_half_up_and_empty_chunks():
    p = equal_chunks("allreduce", 3, 3)
    assert chunk_bounds(p, 10).tolist() == [0, 3, 7, 10]
    assert chunk_bounds(p, 1).tolist() == [0, 0, 1, 1]      # 1 element over 3 chunks: chunk 1 has it
    assert chunk_bounds(p, 0).tolist() == [0, 0, 0, 0]
    assert chunk_bounds(p, 3).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="numel"):
        chunk_bounds(p, -1)


def test_blocked_chunks_stay_inside_rank_blocks():
    assert block_bounds(3, 10).tolist() == [0, 3, 6, 10]
    assert block_bounds(3, 1).tolist() == [0, 0, 0, 1]
    p = equal_chunks("allgather", 3, 6)
    # blocks [0,3) [3,6) [6,10), each split in two by round half up
    assert chunk_bounds(p, 10).tolist() == [0, 2, 3, 5, 6, 8, 10]
    rs = equal_chunks("reducescatter", 3, 3)
    assert chunk_bounds(rs, 10).tolist() == [0, 3, 6, 10]


def test_local_plan_orders_reads_before_writes_and_steps():
    p = copy_after_reduce()
    plan = local_plan(p, 0, 5)
    got = [(o.flow, o.kind, o.step, o.peer, o.op) for o in plan.ops]
    assert got == [(0, SEND, 0, 1, 0), (1, RECV, 0, 2, 0), (3, RECV, 2, 1, 1)]
    assert plan.queues == {0: [0, 1, 2]}
    assert plan.send_numel == 5 and plan.recv_numel == 10
    assert [o.offset for o in plan.recvs] == [0, 5]
    r1 = local_plan(p, 1, 5)
    assert [(o.flow, o.kind) for o in r1.ops] == [(0, RECV), (2, RECV), (3, SEND), (4, SEND)]


def test_local_plan_merges_segments_and_drops_empty_chunks():
    b = PatternBuilder("allreduce", 2)
    b.chunks([0.25] * 4, [0] * 4)
    b.flow(0, 0, 1, [3, 0, 1])
    b.flow(0, 1, 0, [0, 1, 2, 3])
    b.flow(1, 1, 0, [0, 1, 2, 3], "copy")
    b.flow(1, 0, 1, [2], "copy")
    p = b.build()
    plan = local_plan(p, 0, 8)                  # bounds [0,2,4,6,8]
    send = plan.sends[0]
    assert send.chunks.tolist() == [0, 1, 3]
    assert send.segments.tolist() == [[0, 4], [6, 8]] and send.numel == 6
    small = local_plan(p, 0, 2)                 # bounds [0,1,1,2,2]: chunks 1 and 3 are empty
    assert [(o.flow, o.chunks.tolist()) for o in small.ops] == [(0, [0]), (1, [0, 2]), (3, [2]), (2, [0, 2])]
    # numel 1: bounds [0,0,1,1,1], only chunk 1 has data; flow 3 (chunk 2 alone) is not sent at all
    one = local_plan(p, 1, 1)
    assert [(o.flow, o.chunks.tolist()) for o in one.ops] == [(1, [1]), (0, [1]), (2, [1])]
    with pytest.raises(ValueError, match="rank 2"):
        local_plan(p, 2, 8)


def test_assemble_and_merge_traces_from_records():
    b = PatternBuilder("allreduce", 2)
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 1, [c])
    b.flow(1, 1, 0, [c], "copy")
    p = b.build()

    def rec(rank, sent, s0, recv, r1, enter, exit_):
        return LocalRecord(rank, 3, enter, exit_, np.array(sent), np.array(s0, float), np.array([40.0] * len(sent)),
                           np.array(recv), np.array(r1, float), 40, 7)

    recs = [rec(0, [0], [10.5], [1], [12.0], 10.0, 12.1), rec(1, [1], [11.2], [0], [11.0], 10.2, 11.3)]
    tr = assemble_trace(p, recs)
    assert tr.epoch == 3 and tr.message_bytes == 40
    np.testing.assert_allclose(tr.start, [0.5, 1.2])
    np.testing.assert_allclose(tr.end, [1.0, 2.0])
    np.testing.assert_allclose(tr.fct, [0.5, 0.8])
    assert tr.duration == pytest.approx(2.1)
    both = merge_traces([tr, tr])
    np.testing.assert_allclose(both.fct, [1.0, 1.6])
    np.testing.assert_allclose(both.flow_bytes, [80, 80])
    assert both.duration == pytest.approx(4.2)
    # rank 1 enters 1.0 s after rank 0 posted flow 0: flow 0 starts when rank 1 is there (its
    # receive is posted on entry), so its FCT is 0.5 s of transfer, not 1.5 s of waiting
    late = [rec(0, [0], [10.5], [1], [13.0], 10.0, 13.1), rec(1, [1], [12.0], [0], [12.0], 11.5, 12.1)]
    tr2 = assemble_trace(p, late)
    np.testing.assert_allclose(tr2.start, [1.5, 2.0])
    np.testing.assert_allclose(tr2.fct, [0.5, 1.0])
    with pytest.raises(ValueError, match="ranks 0..1"):
        assemble_trace(p, recs[:1])
    recs[1].digest = 8
    with pytest.raises(ValueError, match="digest"):
        assemble_trace(p, recs)


def _execute(p, numel, rng):
    """Run every rank's LocalPlan with the executor's rules, delivering messages in a random
    order (one at a time, whenever no rank can progress); returns inputs and final states."""
    from reactccl.runtime.layout import SEND
    n = p.num_ranks
    x = [rng.integers(-1000, 1000, numel) for _ in range(n)]
    state = [v.copy() for v in x]
    plans = [local_plan(p, r, numel) for r in range(n)]
    recv_of = {o.flow: (r, o.index) for r, pl in enumerate(plans) for o in pl.recvs}
    assert sorted(recv_of) == sorted(o.flow for pl in plans for o in pl.sends)  # both sides agree
    head = [{c: 0 for c in pl.queues} for pl in plans]
    done = [[False] * len(pl.ops) for pl in plans]
    arrived = [dict() for _ in range(n)]
    flying = []
    while True:
        moved = False
        for r, pl in enumerate(plans):
            for op in pl.ops:
                if done[r][op.index] or any(pl.queues[c][head[r][c]] != op.index for c in op.chunk_list):
                    continue
                if op.kind == SEND:
                    flying.append((op.flow, np.concatenate([state[r][a:b] for a, b in op.seg_list])))
                else:
                    if op.index not in arrived[r]:
                        continue
                    data, k = arrived[r][op.index], 0
                    for a, b in op.seg_list:
                        state[r][a:b] = state[r][a:b] + data[k:k + b - a] if op.op == 0 else data[k:k + b - a]
                        k += b - a
                done[r][op.index] = True
                for c in op.chunk_list:
                    head[r][c] += 1
                moved = True
        if moved:
            continue
        if not flying:
            break
        flow, data = flying.pop(int(rng.integers(len(flying))))
        r, i = recv_of[flow]
        arrived[r][i] = data
    assert all(all(d) for d in done), "some op could never run"
    return x, state


@pytest.mark.parametrize("numel", [1, 7, 64])
def test_plans_compute_the_collective_under_any_arrival_order(numel):
    from reactccl.algorithms import generate
    rng = np.random.default_rng(numel)
    cases = [generate("ring", 4), generate("nccl-tree", 5), generate("nccl-tree", 4, slices=3),
             generate("rabenseifner", 6), generate("ring-reducescatter", 3), generate("recursive-doubling", 5),
             generate("binomial-broadcast", 5, root=3), copy_after_reduce()]
    rd = PatternBuilder("allreduce", 4)
    c = rd.chunk(1.0, 0)
    for k in range(2):
        for r in range(4):
            rd.flow(k, r, r ^ (1 << k), [c])
    cases.append(rd.build())
    for p in cases:
        for _ in range(5):
            x, out = _execute(p, numel, rng)
            total = np.sum(x, axis=0)
            coll = p.collective.value
            for r in range(p.num_ranks):
                if coll == "allreduce":
                    want, got = total, out[r]
                elif coll == "broadcast":
                    want, got = x[p.root], out[r]
                else:
                    b = block_bounds(p.num_ranks, numel)
                    if coll == "reducescatter":
                        want, got = total[b[r]:b[r + 1]], out[r][b[r]:b[r + 1]]
                    else:
                        want = np.concatenate([x[q][b[q]:b[q + 1]] for q in range(p.num_ranks)])
                        got = out[r]
                assert np.array_equal(got, want), f"{p.name or coll}, numel {numel}, rank {r}"

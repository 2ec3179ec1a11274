"""Schedules (pipeline parts, staging and in-place decisions) checked without processes:
every rank's schedule runs under the executor's rules against an adversarial network that
reads an unstaged send's data as late as possible and writes an in-place receive the moment
it is delivered, in random orders. Positions a rank does not hold start as garbage."""

import subprocess
import sys

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.runtime.layout import SEND, block_bounds, chunk_bounds, local_plan
from reactccl.runtime.direct import APPLY, SENDS, SENT, WAIT, compile_direct
from reactccl.runtime.schedule import build_schedule, choose_parts, flow_reaches, in_place_receives, receives_in_order
from runtime_patterns import copy_after_reduce, copy_after_two_sends, rd_one_chunk, write_after_send


def _run(p, numel, parts, rng, staging="needed", eager=False):
    """Every rank's schedule with run_data's rules; returns inputs and final states. ``eager``:
    the eager direct schedules (every send staged, no lane waits), on every rank, or on a
    random half of them with ``"mixed"``."""
    n = p.num_ranks
    x = [rng.integers(-1000, 1000, numel) for _ in range(n)]
    state = [v.copy() for v in x]
    coll = p.collective.value
    b = block_bounds(n, numel)
    for r in range(n):   # what a rank does not hold is garbage, not zero
        if coll == "broadcast" and r != p.root:
            state[r][:] = 777_777
        if coll == "allgather":
            keep = state[r][b[r]:b[r + 1]].copy()
            state[r][:] = -555_555
            state[r][b[r]:b[r + 1]] = keep
    if eager == "mixed":        # each rank decides alone (RCollective: by message size and cap)
        eager = [bool(rng.integers(2)) for _ in range(n)]
    elif not isinstance(eager, list):
        eager = [eager] * n
    sch = [build_schedule(p, r, numel, parts, staging, direct=eager[r], eager=eager[r]) for r in range(n)]
    recv_of = {(o.flow, o.part): (r, o.index) for r, s in enumerate(sch) for o in s.recvs}
    assert sorted(recv_of) == sorted((o.flow, o.part) for s in sch for o in s.sends)
    st = [[0] * len(s.ops) for s in sch]            # 0 waiting, 1 posted (unstaged send), 2 done
    arrived = [dict() for _ in range(n)]
    head = [dict.fromkeys(s.queues, 0) for s in sch]
    reading = [dict.fromkeys(s.queues, 0) for s in sch]
    lane = [[len(o.after) for o in s.ops] for s in sch]
    flying, leaving = [], []

    def gather(r, op):
        return np.concatenate([state[r][a:z] for a, z in op.segs])

    def ready(r, op):
        i, s = op.index, sch[r]
        if st[r][i] or any(s.queues[u][head[r][u]] != i for u in op.units):
            return False
        if op.kind == SEND:
            return not lane[r][i]
        return i in arrived[r] and not any(reading[r][u] for u in op.units)

    while True:   # one event at a time, chosen at random: run a ready op, deliver, or leave
        runnable = [(r, op) for r, s in enumerate(sch) for op in s.ops if ready(r, op)]
        total = len(runnable) + len(flying) + len(leaving)
        if not total:
            break
        k = int(rng.integers(total))
        if k < len(runnable):
            r, op = runnable[k]
            i = op.index
            if op.kind == SEND:
                flying.append((r, op, gather(r, op) if op.staged else None))
                st[r][i] = 2 if op.staged else 1
                for u in op.units:
                    reading[r][u] += not op.staged
                if op.staged:
                    leaving.append((r, op))
            else:
                if op.staged:
                    data, j = arrived[r][i], 0
                    for a, z in op.segs:
                        state[r][a:z] = state[r][a:z] + data[j:j + z - a] if op.op == 0 else data[j:j + z - a]
                        j += z - a
                st[r][i] = 2
            for u in op.units:
                head[r][u] += 1
            continue
        k -= len(runnable)
        if k < len(flying):                       # deliver: read the sender now, write in place now
            r, op, data = flying.pop(k)
            if data is None:
                data = gather(r, op)
                leaving.append((r, op))
            dr, di = recv_of[(op.flow, op.part)]
            rop = sch[dr].ops[di]
            if not rop.staged:
                (a, z), = rop.segs
                state[dr][a:z] = data
            arrived[dr][di] = data
        else:                                      # a send has left its sender
            r, op = leaving.pop(k - len(flying))
            if st[r][op.index] == 1:
                st[r][op.index] = 2
                for u in op.units:
                    reading[r][u] -= 1
            for j in sch[r].lane_next.get(op.index, ()):
                lane[r][j] -= 1
    assert all(all(v == 2 for v in row) for row in st), "some op could never run"
    return x, state


def _check(p, numel, x, out):
    total = np.sum(x, axis=0)
    coll = p.collective.value
    b = block_bounds(p.num_ranks, numel)
    for r in range(p.num_ranks):
        if coll == "allreduce":
            want, got = total, out[r]
        elif coll == "broadcast":
            want, got = x[p.root], out[r]
        elif coll == "reduce":
            if r != p.root:
                continue
            want, got = total, out[r]
        elif coll == "reducescatter":
            want, got = total[b[r]:b[r + 1]], out[r][b[r]:b[r + 1]]
        else:
            want = np.concatenate([x[q][b[q]:b[q + 1]] for q in range(p.num_ranks)])
            got = out[r]
        assert np.array_equal(got, want), f"{p.name or coll}, numel {numel}, rank {r}"


CASES = [("ring", 4, {}), ("nccl-tree", 5, {}), ("nccl-tree", 4, {"slices": 3}), ("rabenseifner", 6, {}),
         ("ring-reducescatter", 3, {}), ("ring-allgather", 5, {}), ("recursive-doubling", 5, {}),
         ("binomial-broadcast", 5, {"root": 3}), ("binomial-reduce", 4, {"root": 1})]


@pytest.mark.parametrize("numel,parts", [(1, 1), (7, 2), (64, 3), (64, 1)])
def test_schedules_compute_the_collective_under_adversarial_timing(numel, parts):
    rng = np.random.default_rng(numel * 10 + parts)
    pats = [generate(a, n, **kw) for a, n, kw in CASES] + [rd_one_chunk(4), copy_after_reduce(), write_after_send(),
                                                          copy_after_two_sends()]
    for p in pats:
        for staging, eager, runs in (("needed", False, 10), ("always", False, 2), ("needed", True, 2),
                                    ("needed", "mixed", 4)):
            for _ in range(runs):
                x, out = _run(p, numel, parts, rng, staging, eager)
                _check(p, numel, x, out)


def test_decisions_on_ring_tree_and_recursive_doubling():
    ring = generate("ring", 4)
    # ring: every copy lands in place, no send is staged (no rank writes a chunk it sends that step)
    for r in range(4):
        s = build_schedule(ring, r, 400, parts=2)
        assert not any(o.staged for o in s.sends)
        assert [o.staged for o in s.recvs] == [o.op == 0 for o in s.recvs]
        assert len(s.ops) == 2 * 12 and s.parts == 2
        assert s.send_numel == 0 and s.recv_numel == 3 * 100     # three reduce flows of 100 elements
    # recursive doubling on one chunk sends and receives the chunk in the same step: staged
    rd = rd_one_chunk(4)
    s = build_schedule(rd, 0, 10)
    assert all(o.staged for o in s.ops)
    # copy-after-reduce: rank 0's copy (step 2) follows its own reduce receive (step 0), which the
    # copy's sender (rank 1) does not depend on: no proof, so it is staged
    car = copy_after_reduce()
    assert in_place_receives(car, local_plan(car, 0, 10)) == set()
    assert in_place_receives(car, local_plan(car, 2, 10)) == {4}
    # the 'always' schedule stages everything (the executor before these options)
    s = build_schedule(ring, 1, 400, 1, "always")
    assert all(o.staged for o in s.ops)
    # direct: the data-driven decisions (staging, lanes, in-place copies), only marked direct
    d, s = build_schedule(ring, 1, 400, 1, direct=True), build_schedule(ring, 1, 400, 1)
    assert d.direct and not s.direct
    assert [(o.staged, o.after) for o in d.ops] == [(o.staged, o.after) for o in s.ops]
    # eager direct (messages up to 64 KiB): sends staged, no lane waits; copies still land in place
    e = build_schedule(ring, 1, 400, 1, direct=True, eager=True)
    assert all(o.staged and not o.after for o in e.sends) and not e.lane_next
    assert any(not o.staged for o in e.recvs)
    with pytest.raises(ValueError, match="eager"):
        build_schedule(ring, 1, 400, 1, eager=True)


def test_lanes_and_parts():
    tree = generate("nccl-tree", 4)
    s = build_schedule(tree, 1, 100, parts=2)
    # rank 1 in tree 1: sends up at step 1, down to 0 and 2 at step 3 (after the step-1 send has left)
    for o in s.sends:
        if o.step == 3:
            ups = [s.ops[i] for i in o.after]
            assert ups and all(u.step == 1 and u.part == o.part and u.lane == o.lane for u in ups)
    assert {o.tag for o in s.ops} == {o.flow * 2 + o.part for o in s.ops}
    assert choose_parts(tree, 1 << 20, 4, 1 << 20) == 2          # 2 MB chunks / 1 MB
    assert choose_parts(tree, 1 << 20, 4, None) == 1
    assert choose_parts(tree, 1 << 26, 4, 1 << 20, max_parts=8) == 8
    with pytest.raises(ValueError, match="parts"):
        build_schedule(tree, 0, 10, parts=0)
    with pytest.raises(ValueError, match="stage"):
        build_schedule(tree, 0, 10, stage="sometimes")


def test_the_adversarial_network_catches_an_unsafe_in_place_receive(monkeypatch):
    """Receiving copy-after-reduce's copy into rank 0's tensor at the start is unsafe (the copy
    may land before rank 0 has added rank 2's reduce); the simulation must notice."""
    import reactccl.runtime.schedule as sched
    monkeypatch.setattr(sched, "in_place_receives",
                        lambda p, plan: {o.flow for o in plan.recvs if o.op == 1 and len(o.seg_list) == 1})
    car, rng, wrong = copy_after_reduce(), np.random.default_rng(0), 0
    for _ in range(300):
        x, out = _run(car, 3, 1, rng)
        wrong += any(not np.array_equal(o, np.sum(x, axis=0)) for o in out)
    assert wrong > 0


def _run_direct(p, numel, parts, rng, eager=False):
    """Every rank replays its compiled direct program (run_direct's order) against a network that
    delivers each message at a random moment (an in-place receive is written then). An unstaged
    send reads the sender's tensor at delivery, the latest moment it may, and a ``SENT`` wait
    returns only after that: a write the program lets through too early changes what is sent."""
    n = p.num_ranks
    x = [rng.integers(-1000, 1000, numel) for _ in range(n)]
    state = [v.copy() for v in x]
    sch = [build_schedule(p, r, numel, parts, direct=True, eager=eager) for r in range(n)]
    progs = [compile_direct(s) for s in sch]
    assert all(pr.stuck is None for pr in progs)
    recv_of = {(o.flow, o.part): (r, o) for r, s in enumerate(sch) for o in s.recvs}
    pc = [0] * n
    arrived = [dict() for _ in range(n)]
    left = [set() for _ in range(n)]
    flying = []

    def ready(r):
        code, op = progs[r].steps[pc[r]]
        return (code != WAIT or op.index in arrived[r]) and (code != SENT or op.index in left[r])

    while True:
        movable = [r for r in range(n) if pc[r] < len(progs[r].steps) and ready(r)]
        total = len(movable) + len(flying)
        if not total:
            break
        k = int(rng.integers(total))
        if k >= len(movable):
            sr, op, data = flying.pop(k - len(movable))
            if data is None:        # unstaged: read now, as it leaves
                data = np.concatenate([state[sr][a:z] for a, z in op.segs])
            left[sr].add(op.index)
            dr, rop = recv_of[(op.flow, op.part)]
            if not rop.staged:
                (a, z), = rop.segs
                state[dr][a:z] = data
            arrived[dr][rop.index] = data
            continue
        r = movable[k]
        code, op = progs[r].steps[pc[r]]
        pc[r] += 1
        if code == SENDS:       # staged: the data is read now
            data = np.concatenate([state[r][a:z] for a, z in op.segs]) if op.staged else None
            flying.append((r, op, data))
        elif code == APPLY:
            data, j = arrived[r][op.index], 0
            for a, z in op.segs:
                state[r][a:z] = state[r][a:z] + data[j:j + z - a] if op.op == 0 else data[j:j + z - a]
                j += z - a
    assert all(pc[r] == len(progs[r].steps) for r in range(n)), "a rank's program deadlocked"
    assert not flying
    return x, state


@pytest.mark.parametrize("numel,parts", [(1, 1), (7, 2), (64, 1)])
def test_compiled_direct_programs_compute_the_collective_under_random_delivery(numel, parts):
    rng = np.random.default_rng(numel + parts)
    pats = [generate(a, n, **kw) for a, n, kw in CASES] + [rd_one_chunk(4), copy_after_reduce(), write_after_send(),
                                                          copy_after_two_sends()]
    for p in pats:
        for k in range(6):
            x, out = _run_direct(p, numel, parts, rng, eager=k % 3 == 2)
            _check(p, numel, x, out)


def test_compiled_direct_program_of_a_ring_rank():
    """Rank 1 of a 4-rank ring on 400 elements: reduce-scatter then all-gather; each received reduce is
    added right after its wait, each send goes unstaged as soon as its data is there, copies land in
    place, and the copy into the chunk sent at step k waits (SENT) for that send to have left."""
    ring = generate("ring", 4)
    s = build_schedule(ring, 1, 400, direct=True)
    prog = compile_direct(s)
    kinds = [(code, op.step) for code, op in prog.steps]
    assert kinds == [(SENDS, 0), (WAIT, 0), (APPLY, 0), (SENDS, 1), (WAIT, 1), (APPLY, 1), (SENDS, 2), (WAIT, 2),
                     (APPLY, 2), (SENDS, 3), (WAIT, 3), (SENT, 0), (SENDS, 4), (WAIT, 4), (SENT, 1), (SENDS, 5),
                     (WAIT, 5), (SENT, 2), (SENT, 3), (SENT, 4), (SENT, 5)]
    assert not any(op.staged for code, op in prog.steps if code == SENDS)
    # a lane's sends go in step order: rank 1 of a tree sends down only after its send up has left
    tree = build_schedule(generate("nccl-tree", 4), 1, 100, parts=2, direct=True)
    prog = compile_direct(tree)
    seen = set()
    for code, op in prog.steps:
        if code == SENDS:
            assert all(j in seen for j in op.after), op.describe()
        elif code == SENT:
            seen.add(op.index)
    with pytest.raises(ValueError, match="direct"):
        compile_direct(build_schedule(ring, 1, 400))


def test_a_direct_write_waits_for_the_unstaged_send_of_its_chunk():
    """write-after-send: rank 0's add at step 1 must wait (SENT) for its unstaged step-0 send, or
    rank 2 may be sent x0 + x1 instead of x0; about 3% of random deliveries expose a missing wait,
    so 400 runs miss one with probability ~1e-5."""
    p = write_after_send()
    steps = [(code, op.flow) for code, op in compile_direct(build_schedule(p, 0, 4, direct=True)).steps]
    assert steps.index((SENT, 0)) < steps.index((APPLY, 2))
    rng = np.random.default_rng(7)
    for _ in range(400):
        x, out = _run_direct(p, 4, 1, rng)
        _check(p, 4, x, out)


def test_an_in_place_copy_waits_for_every_send_of_the_step_before_it():
    """copy-after-two-sends: rank 0's copy depends on its second step-0 send only, so landing it in
    place could overwrite what the first one (to rank 2) still reads: it is staged. About 1% of
    random deliveries exposed the old rule (the op just before only) in either executor."""
    p = copy_after_two_sends()
    assert in_place_receives(p, local_plan(p, 0, 4)) == set()
    rng = np.random.default_rng(11)
    for run in (_run, _run_direct):
        for _ in range(1000):
            x, out = run(p, 4, 1, rng)
            _check(p, 4, x, out)


def test_a_direct_program_says_whether_its_receive_times_are_exact():
    """Exact: no SENT before the last WAIT can block. A ring rank's are all for sends that a receive
    it already waited for depends on; recursive doubling's next send waits for the last one to
    leave while the next receive may already be there (RCollective then uses waiter threads)."""
    numel = 1 << 12
    for name, n, want in (("ring", 4, True), ("ring", 9, True), ("ring-allgather", 6, True),
                          ("recursive-doubling", 8, False), ("rabenseifner", 8, False)):
        p = generate(name, n)
        s = build_schedule(p, 1, numel, direct=True)
        assert compile_direct(s).exact is None
        assert compile_direct(s, flow_reaches(p, chunk_bounds(p, numel))).exact is want, name
    p = generate("ring", 16)        # a spent budget proves nothing
    s = build_schedule(p, 1, numel, direct=True)
    assert compile_direct(s, flow_reaches(p, chunk_bounds(p, numel), budget=1)).exact is False


def test_receives_in_order_only_from_one_peer_one_per_step():
    """A ring rank receives from its predecessor only; a double binary tree's ranks from two parents
    or children (its two trees must progress independently); recursive doubling from a new partner
    each step."""
    assert all(receives_in_order(generate("ring", 5), r) for r in range(5))
    assert not any(receives_in_order(generate("nccl-tree", 4), r) for r in range(4))
    assert not any(receives_in_order(generate("recursive-doubling", 8), r) for r in range(8))


def test_schedules_and_direct_programs_import_without_torch():
    # the pure-schedule modules (and this test file) must load on a machine without torch
    code = ("import sys; sys.modules['torch'] = None\n"
            "import reactccl.runtime.direct, reactccl.runtime.schedule, reactccl.runtime.layout\n"
            "try:\n    import reactccl.runtime.run_schedule\nexcept ImportError:\n    print('torch-only')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "torch-only"      # the torch half really was blocked

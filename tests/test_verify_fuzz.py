"""Fuzzing verify against an independent reference checker (issue 11, "done means").

The reference is written here from the schema's stated semantics (types.py, DESIGN.md "The
pattern IR"), in plain Python, sharing no code with verify: a value is None (undefined) or a
Counter of contributor ranks; a rank starts with its own input where the collective gives it
one; flows of step t read the state at the end of step t-1; sending an undefined value, a
reduce into one, and a copy together with another write to one (rank, chunk) in one step
are errors; several reduces add. At the end every output position must hold each required
contribution exactly once and nothing else.

Mutants of valid patterns of every collective, AllToAll included (ops flipped, flows dropped or duplicated,
steps moved or swapped, chunks, sources and destinations changed) must be rejected with a
one-line PatternError exactly when the reference rejects them, and verify's two step paths
(scalar for small steps, vectorised for wide ones) must agree to the letter. The compiled accept
path (verify_fast, up to 64 ranks) must accept exactly what the reference accepts.
"""

from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactccl.algorithms import generate
from reactccl.pattern import CollectivePattern, Flow, Op, PatternError, VerificationError, verify
from reactccl.pattern import verify_steps
from reactccl.pattern.verify import chunk_owner
from reactccl.pattern.verify_fast import accepts

BASES = [("ring", 3, {}), ("ring", 5, {}), ("nccl-tree", 6, {}), ("rabenseifner", 6, {}), ("rd-allreduce", 4, {}),
         ("bucket", 9, {}), ("sp-allreduce", 9, {}), ("trivance-b", 9, {}), ("swing-b", 16, {}),
         ("ring-allgather", 4, {}), ("recursive-doubling", 5, {}), ("recursive-doubling", 4, {}),
         ("ring-reducescatter", 4, {}), ("ring-reducescatter", 3, {}),
         ("binomial-broadcast", 5, {"root": 3}), ("binomial-broadcast", 4, {"root": 0}),
         ("binomial-reduce", 5, {"root": 1}), ("binomial-reduce", 6, {"root": 5}),
         ("alltoall-bruck", 5, {}), ("alltoall-bruck", 4, {"channels": 2}), ("alltoall-pairwise", 4, {"order": "shift"}),
         ("alltoall-pairwise", 3, {})]
PATTERNS = [generate(n, k, **o) for n, k, o in BASES]


# ------------------------------------------------------------------ reference
def _owner(sizes, n, blocks=None):
    """Block of each chunk: chunks lie in id order, block r is [r/B, (r+1)/B) of the message (B = n)."""
    B = n if blocks is None else blocks
    out, start = [], 0.0
    for s in sizes:
        out.append(min(B - 1, int(start * B + 1e-9)))
        start += s
    return out


def reference(coll: str, n: int, root, sizes, flows) -> bool:
    """True when ``flows`` (tuples step, src, dst, chunks, op) compute ``coll`` exactly."""
    C = len(sizes)
    owner = _owner(sizes, n)
    # alltoall: block s*n + d of the n*n blocks is rank s's data for rank d
    dest = [b % n for b in _owner(sizes, n, n * n)] if coll == "alltoall" else owner
    if coll == "alltoall":
        owner = [b // n for b in _owner(sizes, n, n * n)]
    val = {}
    for r in range(n):
        for c in range(C):
            if coll in ("allreduce", "reducescatter", "reduce"):
                val[r, c] = Counter({r: 1})
            elif coll in ("allgather", "alltoall"):
                val[r, c] = Counter({r: 1}) if owner[c] == r else None
            else:
                val[r, c] = Counter({r: 1}) if r == root else None
    by_step = defaultdict(list)
    for f in flows:
        by_step[f[0]].append(f)
    for t in sorted(by_step):
        writes = defaultdict(list)
        for _, s, d, chunks, op in by_step[t]:
            for c in chunks:
                if val[s, c] is None:
                    return False
                writes[d, c].append((op, val[s, c]))
        new = {}
        for key, ws in writes.items():
            if len(ws) > 1 and any(op == "copy" for op, _ in ws):
                return False
            if ws[0][0] == "copy":
                new[key] = Counter(ws[0][1])
            else:
                if val[key] is None:
                    return False
                acc = Counter(val[key])
                for _, v in ws:
                    acc += v
                new[key] = acc
        val.update(new)
    everyone = Counter({r: 1 for r in range(n)})
    if coll == "allreduce":
        want = {(r, c): everyone for r in range(n) for c in range(C)}
    elif coll == "reducescatter":
        want = {(owner[c], c): everyone for c in range(C)}
    elif coll == "reduce":
        want = {(root, c): everyone for c in range(C)}
    elif coll == "allgather":
        want = {(r, c): Counter({owner[c]: 1}) for r in range(n) for c in range(C)}
    elif coll == "alltoall":
        want = {(dest[c], c): Counter({owner[c]: 1}) for c in range(C)}
    else:
        want = {(r, c): Counter({root: 1}) for r in range(n) for c in range(C)}
    return all(val[k] == v for k, v in want.items())


def _flows(p):
    return [(f.step, f.src, f.dst, tuple(f.chunks), f.op.value) for f in p.flows]


def _run_verify(p, small: int):
    old = verify_steps.SMALL_STEP
    verify_steps.SMALL_STEP = small
    try:
        verify(p, compiled=False)
        return "ok", None
    except VerificationError as e:
        return str(e), (e.rank, e.chunk, e.step, e.flow)
    finally:
        verify_steps.SMALL_STEP = old


def _run_compiled(p):
    try:
        verify(p)
        return "ok"
    except VerificationError as e:
        return str(e)


def check(p_base, flows):
    """verify (both paths) and the reference agree on ``flows``; rejections are one line."""
    n, coll, root = p_base.num_ranks, p_base.collective.value, p_base.root
    try:
        p = CollectivePattern(coll, n, p_base.chunks, [Flow(t, s, d, c, Op(o)) for t, s, d, c, o in flows],
                              root=root)
    except PatternError as e:   # structurally malformed: a one-line named error is all we ask
        assert "\n" not in str(e) and str(e)
        return "structural"
    a = _run_verify(p, 0)
    b = _run_verify(p, 10**9)
    assert a == b, f"scalar and vectorised step paths differ:\n{a}\n{b}"
    ok = a[0] == "ok"
    if not ok:
        assert "\n" not in a[0] and a[1][0] is not None and a[1][1] is not None, a
    ref = reference(coll, n, root, p.chunk_size.tolist(), flows)
    assert ok == ref, f"verify {'accepts' if ok else 'rejects: ' + a[0]}; the reference {'accepts' if ref else 'rejects'}"
    fast = accepts(p, chunk_owner(p), np.ones(p.num_chunks, dtype=bool))
    assert fast == ref, f"the compiled count {'accepts' if fast else 'rejects'}; the reference does not"
    assert _run_compiled(p) == a[0]          # verify() as called: the same verdict and message
    return "ok" if ok else "rejected"


# ------------------------------------------------------------------ tests
@pytest.mark.parametrize("p", PATTERNS, ids=lambda p: f"{p.name}-{p.num_ranks}")
def test_reference_accepts_every_generator_output(p):
    assert reference(p.collective.value, p.num_ranks, p.root, p.chunk_size.tolist(), _flows(p))
    assert check(p, _flows(p)) == "ok"


def test_reference_rejects_the_issue_cases():
    for p in (generate("ring-allgather", 4), generate("binomial-broadcast", 4), generate("alltoall-bruck", 4)):
        fl = [(t, s, d, c, "reduce") for t, s, d, c, _ in _flows(p)]
        assert not reference(p.collective.value, p.num_ranks, p.root, p.chunk_size.tolist(), fl)
        assert check(p, fl) == "rejected"


@st.composite
def mutants(draw):
    i = draw(st.integers(0, len(PATTERNS) - 1))
    p = PATTERNS[i]
    flows = _flows(p)
    n, C, T = p.num_ranks, p.num_chunks, p.num_steps
    for _ in range(draw(st.integers(1, 3))):
        if not flows:
            break
        j = draw(st.integers(0, len(flows) - 1))
        t, s, d, ch, op = flows[j]
        kind = draw(st.sampled_from(["op", "drop", "dup", "step", "swap", "chunk", "src", "dst", "all-op"]))
        if kind == "op":
            flows[j] = (t, s, d, ch, "copy" if op == "reduce" else "reduce")
        elif kind == "all-op":
            new = draw(st.sampled_from(["copy", "reduce"]))
            flows = [(a, b, c, e, new) for a, b, c, e, _ in flows]
        elif kind == "drop":
            flows.pop(j)
        elif kind == "dup":
            flows.insert(draw(st.integers(0, len(flows))), (draw(st.integers(0, T)), s, d, ch, op))
        elif kind == "step":
            flows[j] = (draw(st.integers(0, T)), s, d, ch, op)
        elif kind == "swap":
            k = draw(st.integers(0, len(flows) - 1))
            tk = flows[k][0]
            flows[j], flows[k] = (tk, s, d, ch, op), (t,) + flows[k][1:]
        elif kind == "chunk":
            pos = draw(st.integers(0, len(ch) - 1))
            flows[j] = (t, s, d, ch[:pos] + (draw(st.integers(0, C - 1)),) + ch[pos + 1:], op)
        elif kind == "src":
            flows[j] = (t, draw(st.integers(0, n - 1)), d, ch, op)
        else:
            flows[j] = (t, s, draw(st.integers(0, n - 1)), ch, op)
    return p, flows


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutants())
def test_mutants_are_rejected_exactly_when_the_reference_rejects(case):
    p, flows = case
    check(p, flows)


def test_mutants_exercise_every_outcome():
    """The mutants are not all trivially decided: over a fixed sample, op flips are rejected
    for every collective, and re-sending a flow one step later is sometimes harmless (a copy
    of a value that no longer changes) and sometimes not (a second reduce)."""
    import random
    rng = random.Random(11)
    seen = Counter()
    for i in range(400):
        p = rng.choice(PATTERNS)
        flows = _flows(p)
        j = rng.randrange(len(flows))
        t, s, d, ch, op = flows[j]
        if i % 2:
            flows[j] = (t, s, d, ch, "copy" if op == "reduce" else "reduce")
            kind = "flip"
        else:
            flows.append((p.num_steps, s, d, ch, op))
            kind = "resend"
        seen[kind, p.collective.value, check(p, flows)] += 1
    for coll in ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"):
        assert seen["flip", coll, "rejected"] > 0, seen
    assert sum(v for (k, c, r), v in seen.items() if k == "resend" and r == "ok") > 0, seen
    assert sum(v for (k, c, r), v in seen.items() if k == "resend" and r == "rejected") > 0, seen

"""The compiled accept path of verify (reactccl.pattern.verify_fast) against the numpy reference,
on the chunk subsets the tuner checks and at the 64-rank edge (the fuzz test compares it with an
independent reference on whole patterns)."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.pattern import CollectivePattern, VerificationError, verify
from reactccl.pattern.verify import chunk_owner
from reactccl.pattern.verify_fast import MAX_RANKS, accepts

BASES = [("nccl-tree", 8, {"slices": 2}), ("ring", 5, {}), ("swing-b", 16, {}), ("ring-allgather", 6, {}),
         ("ring-reducescatter", 4, {}), ("binomial-broadcast", 7, {"root": 2}), ("binomial-reduce", 6, {"root": 4}),
         ("recursive-doubling", 8, {}), ("alltoall-bruck", 6, {"channels": 2}),
         ("alltoall-pairwise", 5, {"order": "nccl"})]


def _mutant(p, rng):
    src, dst, op, step = p.src.copy(), p.dst.copy(), p.op.copy(), p.step.copy()
    for _ in range(int(rng.integers(1, 3))):
        f = int(rng.integers(p.num_flows))
        kind = rng.integers(4)
        if kind == 0:
            src[f] = rng.integers(p.num_ranks)
        elif kind == 1:
            dst[f] = rng.integers(p.num_ranks)
        elif kind == 2:
            op[f] = 1 - op[f]
        else:
            step[f] = rng.integers(p.num_steps + 1)
    if np.any(src == dst):
        return None
    return CollectivePattern.from_arrays(p.collective, p.num_ranks, p.chunk_size, p.chunk_graph, step, src, dst, op,
                                         p.chunk_ptr, p.chunk_idx, root=p.root)


def _reference(p, chunks):
    try:
        verify(p, chunks=chunks, compiled=False)
        return True
    except VerificationError:
        return False


@pytest.mark.parametrize("name,n,opts", BASES)
def test_compiled_count_agrees_on_chunk_subsets(name, n, opts):
    rng = np.random.default_rng(n)
    base = generate(name, n, **opts)
    verdicts = set()
    for _ in range(60):
        p = _mutant(base, rng)
        if p is None:
            continue
        chunks = np.flatnonzero(rng.random(p.num_chunks) < 0.4)
        want = np.zeros(p.num_chunks, dtype=bool)
        want[chunks] = True
        ref = _reference(p, chunks)
        assert accepts(p, chunk_owner(p), want) == ref
        verdicts.add(ref)
    assert verdicts == {True, False}          # both outcomes were exercised


def test_the_64_rank_edge_and_beyond():
    p = generate("ring", MAX_RANKS)           # every bit of the word is a rank
    assert accepts(p, chunk_owner(p), np.ones(p.num_chunks, dtype=bool)) is True
    rng = np.random.default_rng(0)
    bad = [q for q in (_mutant(p, rng) for _ in range(40)) if q is not None and not _reference(q, None)]
    assert bad and all(accepts(q, chunk_owner(q), np.ones(q.num_chunks, dtype=bool)) is False for q in bad)
    big = generate("ring", MAX_RANKS + 1)
    assert accepts(big, chunk_owner(big), np.ones(big.num_chunks, dtype=bool)) is None
    verify(big)                               # the reference alone, as before


def test_a_rejected_pattern_still_gets_the_reference_message():
    p = generate("ring", 4)
    op = p.op.copy()
    op[:] = 1                                 # every reduce turned into a copy
    q = CollectivePattern.from_arrays(p.collective, 4, p.chunk_size, p.chunk_graph, p.step, p.src, p.dst, op,
                                      p.chunk_ptr, p.chunk_idx)
    with pytest.raises(VerificationError) as compiled:
        verify(q)
    with pytest.raises(VerificationError) as reference:
        verify(q, compiled=False)
    assert str(compiled.value) == str(reference.value) and compiled.value.rank is not None

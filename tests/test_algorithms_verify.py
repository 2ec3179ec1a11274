"""Every issue-2 generator passes the exact check for n = 1..64, and broken variants fail it."""

import numpy as np
import pytest

from reactccl.algorithms import generate, get
from reactccl.pattern import CollectivePattern, VerificationError, verify

CASES = [
    ("nccl-tree", {}), ("nccl-tree", {"slices": 3}),
    ("ring", {}), ("ring-allgather", {}), ("ring-reducescatter", {}),
    ("recursive-doubling", {}), ("recursive-doubling", {"nonpow2": "fold"}),
    ("rabenseifner", {}), ("rd-allreduce", {}),
    ("binomial-broadcast", {}), ("binomial-reduce", {}),
]


@pytest.mark.parametrize("name, opts", CASES, ids=[f"{n}{o or ''}" for n, o in CASES])
def test_generators_verify_for_1_to_64_ranks(name, opts):
    for n in range(1, 65):
        p = generate(name, n, check=False, **opts)
        assert p.collective.value == get(name).collective
        verify(p)


@pytest.mark.parametrize("name", ["binomial-broadcast", "binomial-reduce"])
def test_binomial_every_root_verifies(name):
    for n in (1, 5, 12):
        for root in range(n):
            verify(generate(name, n, root=root, check=False))


# ------------------------------------------------------------------ negatives
def subset(p: CollectivePattern, keep: np.ndarray, **changes) -> CollectivePattern:
    """The pattern restricted to flows ``keep`` (indices, repeats allowed), other fields unchanged."""
    keep = np.asarray(keep)
    counts = np.diff(p.chunk_ptr)[keep]
    ptr = np.concatenate([[0], np.cumsum(counts)])
    idx = np.concatenate([p.chunk_idx[p.chunk_ptr[f]:p.chunk_ptr[f + 1]] for f in keep])
    fields = dict(step=p.step[keep], src=p.src[keep], dst=p.dst[keep], op=p.op[keep])
    fields.update(changes)
    return CollectivePattern.from_arrays(p.collective, p.num_ranks, p.chunk_size, p.chunk_graph,
                                         chunk_ptr=ptr, chunk_idx=idx, root=p.root, **fields)


def test_dropped_flow_names_rank_and_chunk():
    p = generate("ring", 4)
    # drop the allgather flow 2->3 carrying chunk 2 at step 3: rank 3 never gets the final chunk 2
    f = int(np.flatnonzero((p.step == 3) & (p.src == 2))[0])
    assert p.flow(f).chunks == (2,)
    broken = subset(p, np.delete(np.arange(p.num_flows), f))
    with pytest.raises(VerificationError) as e:
        verify(broken)
    assert e.value.chunk == 2 and e.value.rank in (3, 0, 1)
    assert "missing" in e.value.reason and "chunk 2" in str(e.value)


def test_dropped_tree_flow_fails():
    p = generate("nccl-tree", 8)
    f = int(np.flatnonzero((p.src == 1) & (p.dst == 2) & (p.op == 0))[0])  # leaf 1 -> 2 in tree 0
    with pytest.raises(VerificationError, match="rank 1 missing") as e:
        verify(subset(p, np.delete(np.arange(p.num_flows), f)))
    assert e.value.chunk == 0


def test_duplicated_reduce_flow_is_counted_twice():
    p = generate("nccl-tree", 8)
    f = int(np.flatnonzero((p.src == 3) & (p.dst == 2) & (p.op == 0))[0])
    dup = subset(p, np.append(np.arange(p.num_flows), f))
    with pytest.raises(VerificationError, match="contribution of rank 3 counted twice") as e:
        verify(dup)
    assert e.value.chunk == 0                              # tree 0's half, as root 0 sees it
    assert (e.value.rank, e.value.step) == (0, 0)          # the double count arose at step 0 (3 -> 2 twice)
    assert f"flow {p.num_flows} (3->2) reduced chunk 0 into rank 2" in str(e.value)
    # the same mistake in the ring
    r = generate("ring", 5)
    with pytest.raises(VerificationError, match="counted twice"):
        verify(subset(r, np.append(np.arange(r.num_flows), 0)))


def test_swap_in_one_tree_must_be_consistent():
    p = generate("nccl-tree", 16)
    perm = np.arange(16)
    perm[[2, 3]] = [3, 2]
    verify(p.relabel(perm, graph=1))                      # REACT's swap: whole tree 1, still correct
    # swapping the reduce half only is still correct (the broadcast copies overwrite) ...
    verify(p.relabel(perm, flows=(p.flow_graph == 1) & (p.op == 0)))
    # ... but swapping only tree 1's first step breaks it: 3 sends its own data to 1 as leaf
    # position 2 and again, summed, as interior position 3, while 2's data never leaves 2
    first = (p.flow_graph == 1) & (p.step == 0)
    with pytest.raises(VerificationError, match="rank 3 counted twice") as e:
        verify(p.relabel(perm, flows=first))
    assert e.value.chunk == 1


def test_allgather_flow_before_source_holds_chunk():
    p = generate("recursive-doubling", 8)
    # move 0 -> 2 (blocks 0, 1) from step 1 to step 0: rank 0 does not hold block 1 yet
    f = int(np.flatnonzero((p.src == 0) & (p.dst == 2))[0])
    step = p.step.copy()
    step[f] = 0
    with pytest.raises(VerificationError, match="does not hold") as e:
        verify(p.replace(step=step))
    assert (e.value.rank, e.value.chunk, e.value.step) == (0, 1, 0)

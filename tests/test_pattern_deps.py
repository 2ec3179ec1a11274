"""The compiled dependency lists (reactccl.pattern.deps) equal the numpy reference exactly."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.pattern import CollectivePattern
from reactccl.pattern.deps import dependencies_csr, dependencies_numpy

CASES = [("nccl-tree", 8, {"slices": 3}), ("ring", 7, {}), ("rabenseifner", 8, {}), ("swing-b", 16, {}),
         ("ring-allgather", 5, {}), ("binomial-broadcast", 9, {"root": 4}), ("sp-allreduce", 9, {}),
         ("bucket", 12, {"shape": (3, 4)})]


@pytest.mark.parametrize("name,n,opts", CASES)
def test_compiled_dependencies_equal_the_reference(name, n, opts):
    rng = np.random.default_rng(n)
    p = generate(name, n, **opts)
    for k in range(8):
        q = p
        if k:   # other endpoints and steps (not verified: the lists are defined for any pattern)
            src, dst, step = p.src.copy(), p.dst.copy(), p.step.copy()
            f = rng.integers(p.num_flows, size=3)
            src[f] = (dst[f] + rng.integers(1, n, size=3)) % n
            step[rng.integers(p.num_flows)] = rng.integers(p.num_steps + 2)
            q = CollectivePattern.from_arrays(p.collective, n, p.chunk_size, p.chunk_graph, step, src, dst, p.op,
                                              p.chunk_ptr, p.chunk_idx, root=p.root)
        got, want = dependencies_csr(q), dependencies_numpy(q)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_hand_made_lists():
    # 0->1 (chunk 0, step 0), 1->2 (chunk 0, step 1), 2->0 (chunk 1, step 1): only flow 1 depends
    p = CollectivePattern.from_arrays("allreduce", 3, [0.5, 0.5], [0, 0], [0, 1, 1], [0, 1, 2], [1, 2, 0],
                                      [0, 0, 0], [0, 1, 2, 3], [0, 0, 1], check=False)
    ptr, idx = dependencies_csr(p)
    assert ptr.tolist() == [0, 0, 1, 1] and idx.tolist() == [0]


@pytest.mark.parametrize("senders", [5, 40])
def test_long_and_repeated_lists(senders):
    # ranks 1..senders send chunks {0, 1} to rank 0 at step 0 (flow ids in reverse order of rank),
    # then rank 0 sends both chunks on at step 1: its flow depends on every earlier flow, each
    # found through two chunks (listed once, sorted); 40 takes the long-list branch (> 32)
    n = senders + 2
    src = list(range(senders, 0, -1)) + [0]
    dst = [0] * senders + [n - 1]
    step = [0] * senders + [1]
    F = senders + 1
    p = CollectivePattern.from_arrays("allreduce", n, [0.5, 0.5], [0, 0], step, src, dst, [0] * F,
                                      list(range(0, 2 * F + 1, 2)), [0, 1] * F, check=False)
    ptr, idx = dependencies_csr(p)
    assert ptr.tolist() == [0] * (senders + 1) + [senders]
    assert idx.tolist() == list(range(senders))
    want = dependencies_numpy(p)
    assert np.array_equal(ptr, want[0]) and np.array_equal(idx, want[1])

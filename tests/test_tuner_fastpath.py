"""The local search's fast paths decide exactly as the slow ones: a relabelling checked by
:meth:`CollectivePattern.relabelled` fails where :meth:`replace` does, and a swap inside one chunk
graph verifies on that graph's chunks alone iff it verifies whole (chunks never meet)."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.pattern import PatternError, verify
from reactccl.tuner import apply_window_swap, candidate_windows, find_viable_swaps
from reactccl.tuner.steepest import graph_chunks


def _passes(q, chunks=None) -> bool:
    try:
        verify(q, chunks=chunks)
        return True
    except PatternError:
        return False


def _bases(name: str, n: int):
    """The pattern, and it after one viable window swap of graph 0 (a stale set's pattern)."""
    p = generate(name, n)
    yield p
    s = find_viable_swaps(p)
    k = int(np.flatnonzero(s.graph == 0)[0])
    q = apply_window_swap(p, 0, int(s.t0[k]), int(s.t1[k]), int(s.a[k]), int(s.b[k]))
    verify(q)
    yield q


@pytest.mark.parametrize("name,n", [("nccl-tree", 8), ("ring", 5), ("nccl-tree", 6)])
def test_graph_verify_matches_whole_verify(name, n):
    seen = {True: 0, False: 0}
    for base in _bases(name, n):
        cand = candidate_windows(base)
        for i in range(len(cand)):
            g = int(cand.graph[i])
            q = apply_window_swap(base, g, int(cand.t0[i]), int(cand.t1[i]), int(cand.a[i]), int(cand.b[i]))
            whole = _passes(q)
            assert _passes(q, graph_chunks(base, g)) == whole, (name, n, i)
            seen[whole] += 1
    assert seen[True] and seen[False]      # both outcomes exercised


def test_graph_verify_names_bad_chunk_and_checks_ids():
    p = generate("nccl-tree", 8)
    cand = candidate_windows(p)
    for i in range(len(cand)):
        g = int(cand.graph[i])
        q = apply_window_swap(p, g, int(cand.t0[i]), int(cand.t1[i]), int(cand.a[i]), int(cand.b[i]))
        if not _passes(q):
            break
    other = np.flatnonzero(p.chunk_graph != g)
    assert _passes(q, other)               # the untouched graphs still verify on their own
    with pytest.raises(PatternError, match="chunk ids must be in"):
        verify(p, chunks=[p.num_chunks])


def test_relabelled_matches_replace():
    p = generate("nccl-tree", 8)
    src, dst = p.src.copy(), p.dst.copy()
    q = p.relabelled(dst, src)
    r = p.replace(src=dst, dst=src)
    assert np.array_equal(q.src, r.src) and np.array_equal(q.dst, r.dst) and q.root == r.root
    bad = src.copy()
    bad[3] = dst[3]
    for f in (lambda: p.relabelled(bad, dst), lambda: p.replace(src=bad, dst=dst)):
        with pytest.raises(PatternError, match="self-flow"):
            f()
    bad = src.copy()
    bad[0] = 8
    for f in (lambda: p.relabelled(bad, dst), lambda: p.replace(src=bad, dst=dst)):
        with pytest.raises(PatternError, match="out of range"):
            f()


@pytest.mark.parametrize("name,n", [("nccl-tree", 8), ("ring-allgather", 6), ("ring-reducescatter", 6),
                                    ("binomial-broadcast", 6)])
def test_global_swap_keeps_dependencies(name, n):
    from reactccl.tuner import Placement, Swap, Transform
    p = generate(name, n)
    pl = Placement(p)
    rng = np.random.default_rng(0)
    movable = [r for r in range(n) if r != pl.pinned]     # ① never moves a broadcast's root
    for _ in range(6):
        a, b = rng.choice(movable, size=2, replace=False)
        nxt = pl.apply(Swap(Transform.GLOBAL, int(min(a, b)), int(max(a, b))))
        x, y = pl.unverified_pattern().dependencies(), nxt.unverified_pattern().dependencies()
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
        pl = nxt

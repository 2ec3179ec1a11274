"""Transforms ①②③ (§5.3): exact viable sets equal the brute force, pruning, Table 1 derived."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.pattern import verify
from reactccl.tuner import (
    DegreeTable, Placement, Swap, Transform, TunerError, ViableSwaps, apply_window_swap,
    brute_force_viable_swaps, candidate_windows, find_viable_swaps, transform_table,
)

SMALL = [("nccl-tree", n) for n in (3, 4, 5, 6, 7, 8)] + \
        [pytest.param("nccl-tree", n, marks=pytest.mark.slow) for n in (12, 16)] + [("ring", n) for n in (3, 4, 5)] + \
        [("recursive-doubling", n) for n in (4, 5, 6, 8)] + \
        [(a, n) for a in ("ring-allgather", "ring-reducescatter", "binomial-broadcast", "binomial-reduce",
                          "rabenseifner") for n in (4, 5)]


@pytest.mark.parametrize("algo,n", SMALL)
def test_fast_viable_sets_equal_brute_force(algo, n):
    p = generate(algo, n)
    assert find_viable_swaps(p).as_set() == brute_force_viable_swaps(p).as_set()


def test_viable_set_counts_by_hand():
    # RD AllGather on 4 ranks: after step 0, ranks {0,1} and {2,3} hold the same blocks, so only
    # step 1 (the last) can exchange them: windows [1,1] for the pairs (0,1) and (2,3).
    s = find_viable_swaps(generate("recursive-doubling", 4))
    assert s.as_set() == {(0, 1, 1, 0, 1, False), (0, 1, 1, 2, 3, False)}
    # an AllReduce chunk graph is symmetric in its ranks: every pair is a viable ② swap
    tree = generate("nccl-tree", 8)
    s = find_viable_swaps(tree)
    assert int(s.full.sum()) == 2 * 28
    # the 8-rank tree 1 reduce phase (steps 0..2) may move its interior rank 3 to leaf 2
    assert (1, 0, 2, 2, 3, False) in s.as_set()
    # RD on 8 ranks: one graph, every rank busy at all 3 steps: 6 windows [i, j] per pair, 28 pairs
    assert len(candidate_windows(generate("recursive-doubling", 8))) == 6 * 28


def test_window_swap_moves_only_its_flows():
    p = generate("nccl-tree", 8)
    q = apply_window_swap(p, 1, 0, 2, 2, 3)
    verify(q)
    changed = np.flatnonzero((p.src != q.src) | (p.dst != q.dst))
    assert set(p.flow_graph[changed].tolist()) == {1}
    assert p.step[changed].max() <= 2


def _table(n=16):
    p = generate("nccl-tree", n)
    return p, DegreeTable(p)


def test_pruning_reproduces_the_paper_example():
    # §4.3 / Fig 1: rank 3 is interior in tree 1 (graph 1), receiving from 1 and 5 at step 1.
    p, t = _table()
    green = {y for y in range(16) if y != 3 and t.within_budget(Swap(Transform.CHUNK, 3, y, 1))
             and t.lowers(Swap(Transform.CHUNK, 3, y, 1), 3, "in")}
    # green: positions of tree 1 where 3 receives one flow: leaves and the root 15. 4 and 12 are
    # red: they already receive two flows at step 1 in tree 0. 0 and 8 send only one flow at
    # step 0 while rank 3 would send two there (its tree-0 leaf flow and its new tree-1 leaf
    # flow): degree 2 > 1, pruned by the same rule.
    assert green == {2, 6, 10, 14, 15}
    for red in (4, 12, 0, 8):
        assert not t.within_budget(Swap(Transform.CHUNK, 3, red, 1))
    na, nb = t.after(Swap(Transform.CHUNK, 3, 4, 1))
    assert nb[1] == 4                              # rank 4 would receive 1, 5, 2 and 6 at step 1
    for y in (1, 5, 7, 9, 11, 13):                  # interior of tree 1: viable, 3 still gets 2 flows
        yellow = Swap(Transform.CHUNK, 3, y, 1)
        assert t.within_budget(yellow) and not t.lowers(yellow, 3, "in")
    # ① never changes the degree sequence
    assert all(t.within_budget(Swap(Transform.GLOBAL, 3, y)) for y in range(16) if y != 3)


def _available(algo, n):
    """Per transform: [any pruned viable swap exists, one of them lowers the node's degree]."""
    return {k: [v["available"], v["lowers"]] for k, v in transform_table(generate(algo, n)).items()}


@pytest.mark.parametrize("n", [8, 16])
def test_table1_derived_from_pruning(n):
    # react.md Table 1: ring: only ① (spine/failure); RD: ① and ③ (③ for spine/failure);
    # tree: all three, and ②/③ can lower a congested node's degree (steady congestion).
    ring, rd, tree = _available("ring", n), _available("recursive-doubling", n), _available("nccl-tree", n)
    assert ring[Transform.GLOBAL] == [True, False]
    assert not ring[Transform.CHUNK][0] and not ring[Transform.POSITION][0]          # ✘ ✘
    assert rd[Transform.GLOBAL][0] and not rd[Transform.CHUNK][0]                     # ✘ for ②
    assert rd[Transform.POSITION] == [True, False]
    assert tree[Transform.GLOBAL][0]
    assert tree[Transform.CHUNK] == [True, True] and tree[Transform.POSITION] == [True, True]


def test_global_swap_of_allgather_moves_blocks():
    p = generate("recursive-doubling", 8)
    pl = Placement(p)
    g = pl.apply(Swap(Transform.GLOBAL, 2, 5))
    q = g.pattern                                 # verified inside
    f = int(np.flatnonzero((p.step == 0) & (p.src == 2))[0])
    assert q.src[f] == 5 and q.chunk_idx[q.chunk_ptr[f]] == 5   # rank 5 now sends its own block
    bad = pl.apply(Swap(Transform.CHUNK, 2, 5, 0))               # no block move: wrong data
    with pytest.raises(TunerError, match="incorrect pattern"):
        bad.pattern
    assert bad.try_pattern() is None


def test_placement_maps_and_errors():
    p = generate("nccl-tree", 8)
    pl = Placement(p)
    q = pl.apply(Swap(Transform.POSITION, 3, 2, 1, 0, 2))
    moved = (pl.src != q.src) | (pl.dst != q.dst)
    before, after = pl.position_map(moved), q.position_map(moved)
    assert before["g1 t1 p3"] == [3] and after["g1 t1 p3"] == [2]
    with pytest.raises(TunerError, match="ranks must differ"):
        Swap(Transform.GLOBAL, 1, 1)
    with pytest.raises(TunerError, match="needs a chunk graph"):
        Swap(Transform.CHUNK, 1, 2)
    with pytest.raises(TunerError, match="out of range"):
        pl.apply(Swap(Transform.GLOBAL, 1, 9))


def test_viable_sets_follow_relabellings():
    p = generate("nccl-tree", 8)
    pl = Placement(p)
    vs = ViableSwaps()
    s0 = vs.for_graph(pl, 1)
    sw = Swap(Transform.GLOBAL, 3, 6)
    nxt = pl.apply(sw)
    vs.update(pl, sw)
    carried = vs.for_graph(nxt, 1).as_set()
    assert carried == find_viable_swaps(nxt.pattern, graphs=[1]).as_set()
    assert vs.computed == 1 and len(s0) == len(carried)
    sw3 = Swap(Transform.POSITION, 3, 2, 1, 0, 2)
    vs.update(nxt, sw3)
    after = nxt.apply(sw3)
    assert vs.for_graph(after, 1).as_set() == find_viable_swaps(after.pattern, graphs=[1]).as_set()
    assert vs.computed == 2


def test_global_swap_never_moves_the_root_of_a_rooted_collective():
    for algo in ("binomial-broadcast", "binomial-reduce"):
        pl = Placement(generate(algo, 8))
        assert pl.pinned == 0 and not pl.allows_global(0, 3) and pl.allows_global(2, 5)
        with pytest.raises(TunerError, match="rank 0 is the .*root"):
            pl.apply(Swap(Transform.GLOBAL, 0, 3))
        q = pl.apply(Swap(Transform.GLOBAL, 2, 5))
        assert q.pattern.root == 0 and q.pinned == 0
    ar = Placement(generate("nccl-tree", 8))
    assert ar.pinned is None and ar.allows_global(0, 3)

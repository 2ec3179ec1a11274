"""Exact structure of the issue-2 generators, checked against hand-worked instances."""

import re

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.recursive import fold_ranks
from reactccl.algorithms.tree import btree, dtree, tree_levels
from reactccl.pattern import PatternError


def flows_at(p, t):
    """Set of (src, dst, chunks, op) of step t."""
    return {(f.src, f.dst, tuple(sorted(f.chunks)), f.op.value) for f in p.flows if f.step == t}


# ------------------------------------------------------------------ NCCL trees
@pytest.mark.parametrize("n, tree0, tree1", [
    (8, [-1, 2, 4, 2, 0, 6, 4, 6], [1, 3, 1, 7, 5, 3, 5, -1]),
    (16, [-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 14, 12, 14],
     [1, 3, 1, 7, 5, 3, 5, 15, 9, 11, 9, 7, 13, 11, 13, -1]),
    # odd n, by hand from the bit rule and the shift x -> x+1 mod n
    (3, [-1, 2, 0], [1, -1, 0]),
    (5, [-1, 2, 4, 2, 0], [1, -1, 3, 0, 3]),
    (7, [-1, 2, 4, 2, 0, 6, 4], [5, -1, 3, 5, 3, 1, 0]),
    # even non-power of two: 5's parent 4|2 = 6 is out of range, so it is 4; mirror for tree 1
    (6, [-1, 2, 4, 2, 0, 4], [1, 5, 3, 1, 3, -1]),
    (1, [-1], [-1]),
    (2, [-1, 0], [1, -1]),
])
def test_dtree_parents(n, tree0, tree1):
    (p0, _), (p1, _) = dtree(n)
    assert p0.tolist() == tree0
    assert p1.tolist() == tree1


def test_btree_children_follow_nccl_rule():
    # n = 6: rank 4 has low bit 4, so children 4-2 = 2 and 4+2 = 6 -> out of range, halved: 4+1 = 5
    _, ch = btree(6)
    assert ch.tolist() == [[-1, 4], [-1, -1], [1, 3], [-1, -1], [2, 5], [-1, -1]]
    assert btree(8)[1][0].tolist() == [-1, 4]        # root's only child: largest power of two below n
    assert btree(5)[1][0].tolist() == [-1, 4]


@pytest.mark.parametrize("n", list(range(1, 65)) + [100, 1023])
def test_tree_children_are_inverse_of_parents(n):
    for parent, children in dtree(n):
        from_children = np.full(n, -1)
        for r in range(n):
            for c in children[r]:
                if c >= 0:
                    assert from_children[c] == -1
                    from_children[c] = r
        assert from_children.tolist() == parent.tolist()
        tree_levels(parent)                               # one root, no cycle


@pytest.mark.parametrize("n", range(2, 65, 2))
def test_even_n_each_rank_leaf_in_exactly_one_tree(n):
    leaf = [(c < 0).all(axis=1) for _, c in dtree(n)]
    assert np.array_equal(leaf[0] ^ leaf[1], np.ones(n, bool))
    assert np.array_equal(np.flatnonzero(leaf[0]), np.arange(1, n, 2))   # odd ranks in tree 0


def test_nccl_tree_16_steps_match_react_4_3():
    p = generate("nccl-tree", 16)
    assert p.num_steps == 8                                   # 2 * depth, depth 4
    red = p.op == 0
    assert p.step[red].max() == 3                             # reduce in 4 steps
    assert np.bincount(p.step, minlength=8).tolist() == [16, 8, 4, 2, 2, 4, 8, 16]
    assert flows_at(p, 3) == {(8, 0, (0,), "reduce"), (7, 15, (1,), "reduce")}
    assert flows_at(p, 2) == {(4, 8, (0,), "reduce"), (12, 8, (0,), "reduce"),
                              (3, 7, (1,), "reduce"), (11, 7, (1,), "reduce")}
    assert flows_at(p, 4) == {(0, 8, (0,), "copy"), (15, 7, (1,), "copy")}
    assert p.chunk_size.tolist() == [0.5, 0.5] and p.chunk_graph.tolist() == [0, 1]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 16, 33])
def test_nccl_tree_takes_twice_the_depth(n):
    (p0, _), _ = dtree(n)
    depth = int(tree_levels(p0)[0].max())
    p = generate("nccl-tree", n)
    assert p.num_steps == 2 * depth
    assert p.num_flows == 4 * (n - 1)


def test_nccl_tree_slices_run_one_step_behind():
    K = 3
    base = generate("nccl-tree", 16)
    p = generate("nccl-tree", 16, slices=K)
    assert p.num_steps == 8 + K - 1
    assert np.allclose(p.chunk_size, 1 / 6) and p.chunk_graph.tolist() == [0, 0, 0, 1, 1, 1]
    want = {(f.step, f.src, f.dst, f.chunks[0], f.op.value) for f in base.flows}
    for j in range(K):
        got = {(f.step - j, f.src, f.dst, f.chunks[0] // K, f.op.value)
               for f in p.flows if f.chunks[0] % K == j}
        assert got == want


def test_nccl_tree_bad_options():
    with pytest.raises(PatternError, match="slices"):
        generate("nccl-tree", 8, slices=0)
    with pytest.raises(PatternError, match="n"):
        dtree(0)


# ------------------------------------------------------------------------ ring
def test_ring_allreduce_step_order_n4():
    p = generate("ring", 4)
    assert p.num_steps == 6
    # chunk sent by rank i at each step: i-1, i-2, i-3 (reduce), then i, i-1, i-2 (copy)
    table = {i: [] for i in range(4)}
    for t in range(6):
        for (s, d, ch, op) in sorted(flows_at(p, t)):
            assert d == (s + 1) % 4
            table[s].append((ch[0], op[0]))
    assert table[0] == [(3, "r"), (2, "r"), (1, "r"), (0, "c"), (3, "c"), (2, "c")]
    assert table[1] == [(0, "r"), (3, "r"), (2, "r"), (1, "c"), (0, "c"), (3, "c")]
    assert table[3] == [(2, "r"), (1, "r"), (0, "r"), (3, "c"), (2, "c"), (1, "c")]
    assert p.chunk_graph.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16])
def test_ring_step_counts(n):
    assert generate("ring", n).num_steps == 2 * (n - 1)
    assert generate("ring", n).num_flows == 2 * n * (n - 1)
    assert generate("ring-allgather", n).num_steps == n - 1
    assert generate("ring-reducescatter", n).num_steps == n - 1


def test_ring_allgather_and_reducescatter_n3():
    ag = generate("ring-allgather", 3)
    assert flows_at(ag, 0) == {(0, 1, (0,), "copy"), (1, 2, (1,), "copy"), (2, 0, (2,), "copy")}
    assert flows_at(ag, 1) == {(0, 1, (2,), "copy"), (1, 2, (0,), "copy"), (2, 0, (1,), "copy")}
    rs = generate("ring-reducescatter", 3)
    assert flows_at(rs, 0) == {(0, 1, (2,), "reduce"), (1, 2, (0,), "reduce"), (2, 0, (1,), "reduce")}
    assert flows_at(rs, 1) == {(0, 1, (1,), "reduce"), (1, 2, (2,), "reduce"), (2, 0, (0,), "reduce")}


# ------------------------------------------------------------ recursive doubling
def test_recursive_doubling_partners_n8():
    p = generate("recursive-doubling", 8)
    assert p.num_steps == 3 and p.chunk_graph.tolist() == [0] * 8
    for s in range(3):
        got = flows_at(p, s)
        want = set()
        for r in range(8):
            a = (r >> s) << s
            want.add((r, r ^ (1 << s), tuple(range(a, a + (1 << s))), "copy"))
        assert got == want


def test_recursive_doubling_dissemination_n6():
    p = generate("recursive-doubling", 6)
    assert p.num_steps == 3                                    # ceil(log2 6)
    assert flows_at(p, 0) == {(r, (r - 1) % 6, (r,), "copy") for r in range(6)}
    assert flows_at(p, 1) == {(r, (r - 2) % 6, tuple(sorted({r, (r + 1) % 6})), "copy") for r in range(6)}
    # last step: only n - 4 = 2 blocks are still missing
    assert flows_at(p, 2) == {(r, (r - 4) % 6, tuple(sorted({r, (r + 1) % 6})), "copy") for r in range(6)}
    # bandwidth optimal: every rank receives (n-1)/n of the message
    recv = np.bincount(p.dst, weights=p.flow_fraction, minlength=6)
    assert np.allclose(recv, 5 / 6)


@pytest.mark.parametrize("n, steps", [(3, 2), (5, 3), (7, 3), (9, 4), (12, 4), (33, 6)])
def test_recursive_doubling_step_counts(n, steps):
    assert generate("recursive-doubling", n).num_steps == steps
    assert generate("recursive-doubling", n, nonpow2="fold").num_steps == (n.bit_length() - 1) + 2


def test_recursive_doubling_fold_n6():
    assert fold_ranks(6)[0:2] == (4, 2) and fold_ranks(6)[2].tolist() == [1, 3, 4, 5]
    p = generate("recursive-doubling", 6, nonpow2="fold")
    assert flows_at(p, 0) == {(0, 1, (0,), "copy"), (2, 3, (2,), "copy")}
    # new ranks 0..3 = real 1, 3, 4, 5; new rank 0 holds real blocks {0, 1}, new rank 1 {2, 3}
    assert flows_at(p, 1) == {(1, 3, (0, 1), "copy"), (3, 1, (2, 3), "copy"),
                              (4, 5, (4,), "copy"), (5, 4, (5,), "copy")}
    assert flows_at(p, 2) == {(1, 4, (0, 1, 2, 3), "copy"), (3, 5, (0, 1, 2, 3), "copy"),
                              (4, 1, (4, 5), "copy"), (5, 3, (4, 5), "copy")}
    assert flows_at(p, 3) == {(1, 0, (1, 2, 3, 4, 5), "copy"), (3, 2, (0, 1, 3, 4, 5), "copy")}
    with pytest.raises(PatternError, match="nonpow2"):
        generate("recursive-doubling", 6, nonpow2="magic")


# ------------------------------------------------------------------ rabenseifner
def test_rabenseifner_n8_halving_then_doubling():
    p = generate("rabenseifner", 8)
    assert p.num_steps == 6 and p.num_chunks == 8
    # step 0: partner r^1, lower rank keeps the lower half
    assert (0, 1, (4, 5, 6, 7), "reduce") in flows_at(p, 0)
    assert (1, 0, (0, 1, 2, 3), "reduce") in flows_at(p, 0)
    assert (0, 2, (2, 3), "reduce") in flows_at(p, 1)
    assert (0, 4, (1,), "reduce") in flows_at(p, 2)
    assert (4, 0, (0,), "reduce") in flows_at(p, 2)            # rank 0 ends owning chunk 0
    assert (0, 4, (0,), "copy") in flows_at(p, 3)              # allgather in reverse order
    assert (0, 1, (0, 1, 2, 3), "copy") in flows_at(p, 5)


def test_rabenseifner_fold_n6():
    p = generate("rabenseifner", 6)
    assert p.num_steps == 2 * 2 + 2 and p.num_chunks == 4
    assert flows_at(p, 0) == {(0, 1, (0, 1, 2, 3), "reduce"), (2, 3, (0, 1, 2, 3), "reduce")}
    assert flows_at(p, 1) == {(1, 3, (2, 3), "reduce"), (3, 1, (0, 1), "reduce"),
                              (4, 5, (2, 3), "reduce"), (5, 4, (0, 1), "reduce")}
    assert flows_at(p, 5) == {(1, 0, (0, 1, 2, 3), "copy"), (3, 2, (0, 1, 2, 3), "copy")}
    assert not ({0, 2} & set(p.src[(p.step > 0)].tolist()))   # folded-out ranks sit out


# ------------------------------------------------------------------- binomial
def test_binomial_n8_root0():
    b = generate("binomial-broadcast", 8)
    assert [flows_at(b, t) for t in range(3)] == [
        {(0, 4, (0,), "copy")},
        {(0, 2, (0,), "copy"), (4, 6, (0,), "copy")},
        {(0, 1, (0,), "copy"), (2, 3, (0,), "copy"), (4, 5, (0,), "copy"), (6, 7, (0,), "copy")}]
    r = generate("binomial-reduce", 8)
    assert [flows_at(r, t) for t in range(3)] == [
        {(1, 0, (0,), "reduce"), (3, 2, (0,), "reduce"), (5, 4, (0,), "reduce"), (7, 6, (0,), "reduce")},
        {(2, 0, (0,), "reduce"), (6, 4, (0,), "reduce")},
        {(4, 0, (0,), "reduce")}]


def test_binomial_root_and_errors():
    b = generate("binomial-broadcast", 6, root=4)
    assert b.root == 4
    assert flows_at(b, 0) == {(4, 2, (0,), "copy")}           # relative rank 4 = rank (4+4) mod 6
    assert generate("binomial-reduce", 5, root=3).num_steps == 3
    with pytest.raises(PatternError, match="root"):
        generate("binomial-reduce", 4, root=4)


@pytest.mark.parametrize("text", ["8x4", "8,4", "(8, 4)", "[8,4]", (8, 4), [8, 4]])
def test_generate_reads_a_shape_option_as_text(text):
    p = generate("sp-allreduce", 32, shape=text)
    assert p.name == "sp-allreduce 8x4" and p.num_steps == 12  # 2H, H = 4 + 2


@pytest.mark.parametrize("name, opts, words", [
    ("k-sp-allreduce", {"k": "2.5", "shape": "8x8"}, "option k: expected an integer, got '2.5'"),
    ("k-sp-allreduce", {"k": "abc", "shape": "8x8"}, "option k: expected an integer, got 'abc'"),
    ("k-sp-allreduce", {"k": True, "shape": "8x8"}, "option k: expected an integer, got True"),
    ("sp-allreduce", {"shape": "8xa"}, "option shape: expected a shape like 8x4 or 8,4, got '8xa'"),
    ("sp-spineleaf", {"q": "abc"}, "option q: expected an integer, got 'abc'"),
])
def test_generate_names_a_badly_typed_option(name, opts, words):
    n = 8 if name == "sp-spineleaf" else 64
    with pytest.raises(PatternError, match=re.escape(words)):
        generate(name, n, **opts)


def test_generate_turns_a_refused_argument_into_a_pattern_error():
    with pytest.raises(PatternError, match=r"sp-allreduce with 4 ranks: torus: every side must be >= 3"):
        generate("sp-allreduce", 4)
    assert generate("k-sp-allreduce", 64, k="3", shape="8x8").num_steps == 6  # text "3" is the int 3

"""SP-allreduce and its variants: verified patterns, round counts, Ψ = Θ = Ω = 1 (SP-allreduce §3, §6, A.5)."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.sp_allreduce import rectangular_trees, windmill_tree
from reactccl.algorithms.torus_common import bfs_tree, torus_group, tree_depth
from reactccl.cost.deficiency import deficiency
from reactccl.pattern import PatternError
from reactccl.topology.torus import HyperXGeometry, SpineLeafGeometry, TorusGeometry


def optimal(d):
    return d.psi == pytest.approx(1) and d.theta == pytest.approx(1) and d.omega == pytest.approx(1)


@pytest.mark.parametrize("shape", [(3, 3), (4, 4), (5, 5), (8, 8), (3, 3, 3), (4, 4, 4)])
def test_square_torus(shape):
    p = int(np.prod(shape))
    pat = generate("sp-allreduce", p, shape=shape)  # generate() runs the exact count check
    geom = TorusGeometry(shape)
    H = len(shape) * (shape[0] // 2)
    assert pat.num_steps == 2 * H
    assert pat.num_chunks == 2 * len(shape) * p
    assert pat.num_flows == 2 * (p - 1) * pat.num_chunks
    d = deficiency(pat, geom)
    assert optimal(d)
    # every round loads every link alike: the max load equals the mean load
    assert d.rounds == 2 * H


def test_sp_8x8_round_loads():
    # BFS layer sizes on 8x8 from the root: 1,4,8,12,14,12,8,4,1 (depth 1..8: 4..1)
    d = deficiency(generate("sp-allreduce", 64), TorusGeometry((8, 8)))
    layers = np.array([4, 8, 12, 14, 12, 8, 4, 1])
    # round i of the reduce sends the layer at depth H-i+1; one link's share = layer size / 256 chunks
    # times |Γ| / |E| = 1
    assert d.max_load[:8] == pytest.approx((layers[::-1] / 256).tolist())
    assert d.q == pytest.approx(2 * 63 / (64 * 4))


def test_group_is_regular_on_links():
    g = TorusGeometry((5, 5))
    perms = torus_group(g)
    assert perms.shape == (100, 25)
    # images of the directed link 0 -> (1,0) hit each of the 100 links exactly once
    tail, head = g.link_ends()
    a, b = perms[:, 0], perms[:, int(g.node([[1, 0]])[0])]
    lid = {(int(t), int(h)): i for i, (t, h) in enumerate(zip(tail, head))}
    hits = sorted(lid[(int(x), int(y))] for x, y in zip(a, b))
    assert hits == list(range(100))


def test_bfs_tree_depth_is_distance():
    g = TorusGeometry((6, 7))
    par = bfs_tree(g)
    assert tree_depth(par).tolist() == g.distance(np.zeros(42, int), np.arange(42)).tolist()


@pytest.mark.parametrize("shape", [(6, 4), (7, 5), (16, 3), (8, 4), (12, 5)])
def test_rectangular(shape):
    p = shape[0] * shape[1]
    pat = generate("sp-allreduce", p, shape=shape)
    H = shape[0] // 2 + shape[1] // 2
    assert pat.num_steps == 2 * H and pat.num_chunks == 4 * p
    assert optimal(deficiency(pat, TorusGeometry(shape)))


@pytest.mark.parametrize("shape,rounds", [((64, 16), 80), ((128, 8), 136), ((256, 4), 260)])
def test_rectangular_paper_round_counts(shape, rounds):
    # §7.5: two BFS trees of depth H; check the balance condition per depth on the trees
    g = TorusGeometry(shape)
    a, b = rectangular_trees(g)
    da, db = tree_depth(a), tree_depth(b)
    assert 2 * da.max() == 2 * db.max() == rounds
    off = g.offsets(np.zeros(g.num_nodes, int), np.arange(g.num_nodes))
    for par, dep in ((a, da), (b, db)):
        assert (g.distance(np.arange(g.num_nodes)[1:], par[1:]) == 1).all()
        assert (dep == np.abs(off).sum(1)).all()
    horiz = lambda par: (g.coords(np.arange(1, g.num_nodes))[:, 0] != g.coords(par[1:])[:, 0])
    h = np.bincount(da[1:], weights=horiz(a)) + np.bincount(db[1:], weights=horiz(b))
    v = np.bincount(da[1:], weights=~horiz(a)) + np.bincount(db[1:], weights=~horiz(b))
    assert h[1:].tolist() == v[1:].tolist()


@pytest.mark.parametrize("shape", [(4, 4), (6, 6), (8, 8), (4, 4, 4)])
def test_2h_minus_1(shape):
    p = int(np.prod(shape))
    pat = generate("sp-allreduce-2h1", p, shape=shape)
    H = len(shape) * shape[0] // 2
    assert pat.num_steps == 2 * H - 1
    assert optimal(deficiency(pat, TorusGeometry(shape)))


def test_2h_minus_1_rejects_odd():
    with pytest.raises(PatternError, match="even n"):
        generate("sp-allreduce-2h1", 25)


@pytest.mark.parametrize("n", [4, 5, 6, 7])
def test_hyperx_windmill(n):
    g = HyperXGeometry((n, n))
    par = windmill_tree(g)
    assert tree_depth(par).max() == 2
    pat = generate("sp-hyperx", n * n)
    assert pat.num_steps == 4 and pat.num_chunks == 4 * n * n
    assert optimal(deficiency(pat, g))


def test_spine_leaf_star():
    pat = generate("sp-spineleaf", 32, q=4)
    assert pat.num_steps == 2 and pat.num_chunks == 32
    d = deficiency(pat, SpineLeafGeometry(4, 8))
    assert d.psi == pytest.approx(1)
    # 3 of 31 destinations are on the root's leaf (2 hops), 28 cross the spine (4 hops)
    assert d.theta == pytest.approx((3 * 2 + 28 * 4) / 31)
    # each host's uplink carries its 31 chunks of 1/32 in round 1
    assert d.max_load[0] == pytest.approx(31 / 32)


@pytest.mark.parametrize("leaves, q", [(4, 4), (8, 4), (3, 5)])
def test_spine_leaf_q_is_the_uplink_bound(leaves, q):
    # a host's one uplink must carry 2(p-1)/p of N; the star meets it in 2 rounds, the relay
    # tree in 4 with fewer spine hops, Bucket in more rounds: Θ differs, Q does not
    p = leaves * q
    geom = SpineLeafGeometry(q, leaves)
    star = deficiency(generate("sp-spineleaf", p, q=q), geom)
    relay = deficiency(generate("sp-spineleaf", p, q=q, tree="relay"), geom)
    assert star.rounds == 2 and relay.rounds == 4
    assert star.q == pytest.approx(2 * (p - 1) / p) and relay.q == pytest.approx(2 * (p - 1) / p)
    # star: q-1 hosts 2 hops away, p-q 4 hops; relay: leaves-1 edges of 4 hops, the rest 2
    assert star.theta == pytest.approx((2 * (q - 1) + 4 * (p - q)) / (p - 1))
    assert relay.theta == pytest.approx((4 * (leaves - 1) + 2 * (p - leaves)) / (p - 1))
    assert star.psi * star.theta * star.omega == pytest.approx(star.q * geom.num_links / (2 * (p - 1)))
    bucket = deficiency(generate("bucket", p, shape=(leaves, q)), geom)
    assert bucket.q == pytest.approx(star.q) and bucket.rounds > star.rounds


def test_errors():
    with pytest.raises(PatternError, match="not an equal-sided"):
        generate("sp-allreduce", 10)
    with pytest.raises(PatternError, match="q"):
        generate("sp-spineleaf", 10, q=3)
    with pytest.raises(PatternError, match="tree"):
        generate("sp-spineleaf", 16, q=4, tree="ring")


def test_structural_checks_agree_with_verify():
    from reactccl.algorithms.sp_check import check_sp_symmetry, check_tree_family

    for name in ("sp-allreduce", "bucket", "swing-b", "k-sp-allreduce"):
        pat = generate(name, 64)
        info = check_tree_family(pat, TorusGeometry((8, 8)) if name in ("sp-allreduce", "bucket") else None)
        assert info["chunks"] == pat.num_chunks
    g = TorusGeometry((8, 8))
    info = check_sp_symmetry(g, bfs_tree(g), torus_group(g))
    assert info["rounds"] == 16 and info["chunks"] == 256
    assert info["round_load"] == pytest.approx([x / 256 for x in (1, 4, 8, 12, 14, 12, 8, 4)])


def test_structural_check_catches_errors():
    from reactccl.algorithms.sp_check import check_sp_symmetry, check_tree_family

    pat = generate("sp-allreduce", 16)
    # a copy moved before the last reduce of its chunk
    step = pat.step.copy()
    i = int(np.flatnonzero(pat.op == 1)[0])
    step[i] = 0
    with pytest.raises(PatternError, match="copy at step 0 before the last reduce|forwards"):
        check_tree_family(pat.replace(step=step))
    g = TorusGeometry((4, 4))
    perms = torus_group(g, reflect=False)
    with pytest.raises(PatternError, match="regularly"):
        check_sp_symmetry(g, bfs_tree(g), perms)
    with pytest.raises(PatternError, match="BFS"):
        par = bfs_tree(g)
        par[10] = 0  # 10 = (2, 2) hangs off the root: not a BFS tree
        check_sp_symmetry(g, par, torus_group(g))

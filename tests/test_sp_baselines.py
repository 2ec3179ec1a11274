"""Torus baselines (Bucket, Swing, Trivance, ring, recursive doubling): verified, rounds, and
the closed forms of SP-allreduce Appendix C for Ψ and Θ."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.swing import rho, swing_peers
from reactccl.algorithms.torus_baselines import disjoint_cycles, hamiltonian_cycle
from reactccl.algorithms.torus_common import dimension_walk
from reactccl.algorithms.trivance import trivance_distances
from reactccl.cost.deficiency import deficiency
from reactccl.pattern import PatternError
from reactccl.topology.torus import HyperXGeometry, TorusGeometry


def metrics(name, shape, geom=None, **kw):
    p = int(np.prod(shape))
    pat = generate(name, p, shape=shape, **kw)  # verified by generate()
    return pat, deficiency(pat, geom or TorusGeometry(shape))


@pytest.mark.parametrize("shape", [(4, 4), (5, 5), (8, 8), (3, 3, 3)])
def test_bucket_fully_optimal(shape):
    pat, d = metrics("bucket", shape)
    n, D = shape[0], len(shape)
    assert pat.num_steps == 2 * D * (n - 1)
    assert (d.psi, d.theta, d.omega) == pytest.approx((1, 1, 1))


def test_rho_and_partners():
    assert [rho(s) for s in range(5)] == [1, -1, 3, -5, 11]
    g = TorusGeometry((8,))
    peers = [q[0].tolist() for q in swing_peers(g, 0)]
    assert peers[0][:2] == [1, 0] and peers[1][:2] == [7, 2] and peers[2][:2] == [3, 6]
    for q in peers:  # involutions
        assert [q[x] for x in q] == list(range(8))
    assert dimension_walk([2, 1], 1) == [(1, 0), (0, 0), (0, 1)]


@pytest.mark.parametrize("n,d", [(4, 2), (8, 2), (16, 2), (4, 3)])
def test_swing_l_closed_form(n, d):
    # Appendix C.3: Ψ = p d m / (2(p-1)), Θ = A_m / m, with a_k the ring distance of ρ(k)
    m = int(np.log2(n))
    p = n ** d
    pat, dd = metrics("swing-l", (n,) * d)
    a = [min(abs(rho(k)) % n, n - abs(rho(k)) % n) for k in range(m)]
    assert pat.num_steps == d * m
    assert dd.psi == pytest.approx(p * d * m / (2 * (p - 1)))
    assert dd.theta == pytest.approx(sum(a) / m)


@pytest.mark.parametrize("shape", [(8, 8), (6, 6), (16, 4), (4, 4, 4)])
def test_swing_b_minimum_volume(shape):
    pat, d = metrics("swing-b", shape)
    assert pat.num_steps == 2 * sum(int(np.ceil(np.log2(n))) for n in shape)
    assert d.psi == pytest.approx(1)


def test_swing_b_theta_8x8():
    # blocks per global step t: 1/2^(t+1) of a part; distances 1, 1, 3 by step-in-dimension t//2
    w = np.array([2.0 ** -(t + 1) for t in range(6)])
    a = np.array([1, 1, 1, 1, 3, 3])
    _, d = metrics("swing-b", (8, 8))
    assert d.theta == pytest.approx((w * a).sum() / w.sum())
    assert d.omega == pytest.approx(1)


@pytest.mark.parametrize("shape", [(3, 3), (5, 5), (7, 4), (3, 3, 3), (9, 9)])
def test_swing_b_odd_sides_direct_exchange(shape):
    # odd n: Swing on n-1 coordinates plus one direct-exchange step of the last coordinate
    pat, d = metrics("swing-b", shape)  # metrics() verifies exactly
    assert pat.num_steps == 2 * sum(int(np.ceil(np.log2(n - 1))) + 1 if n % 2 else int(np.log2(n)) for n in shape)
    assert d.psi == pytest.approx(1)
    if set(shape) == {3}:
        assert d.theta == pytest.approx(1)  # on a ring of 3 every pair is adjacent


@pytest.mark.parametrize("shape, steps", [((5, 5), 8), ((6, 8), 7), ((3, 3, 3), 9), ((12, 8), 8), ((7, 4), 6), ((10,), 5)])
def test_swing_l_shrinks_other_sides_to_a_power_of_two(shape, steps):
    # per side n: log2 pof2 Swing steps, + a fold and an unfold when n is not a power of two
    pat, d = metrics("swing-l", shape)  # verified exactly
    assert pat.num_steps == steps
    if shape == (6, 8):
        # fold along dimension 0: rows 0 and 2 add into rows 1 and 3 (one hop, both chunks), back at the end
        first = (pat.step == 0)
        assert sorted(set(zip(pat.src[first].tolist(), pat.dst[first].tolist()))) == \
            sorted((8 * x + y, 8 * (x + 1) + y) for x in (0, 2) for y in range(8))
        assert (pat.op[pat.step == steps - 1] == 1).all() and d.psi > 1


def test_swing_l_on_3_ranks_by_hand():
    p = generate("swing-l", 3, shape=(3,))
    flows = sorted(set(zip(p.step.tolist(), p.src.tolist(), p.dst.tolist(), p.op.tolist())))
    assert flows == [(0, 0, 1, 0), (1, 1, 2, 0), (1, 2, 1, 0), (2, 1, 0, 1)]


@pytest.mark.parametrize("t,d", [(1, 2), (2, 2), (1, 3), (3, 1)])
def test_trivance_closed_forms(t, d):
    # Appendix C.4 (n = 3^t): TrivanceB Ψ = 1; TrivanceL Ψ = p d t / (p-1), Θ = (n-1)/(2t)
    n = 3 ** t
    shape = (n,) * d
    p = n ** d
    if d == 1:
        shape = (n,)
    _, db = metrics("trivance-b", shape)
    pl, dl = metrics("trivance-l", shape)
    assert db.psi == pytest.approx(1)
    assert pl.num_steps == d * t
    assert dl.psi == pytest.approx(p * d * t / (p - 1))
    assert dl.theta == pytest.approx((n - 1) / (2 * t))


def test_trivance_other_sides():
    assert trivance_distances(27) == [1, 3, 9]
    assert trivance_distances(8) == [1, 3]
    assert trivance_distances(16) == [1, 3, 4]
    pat, d = metrics("trivance-b", (8, 8))
    assert pat.num_steps == 8 and d.psi == pytest.approx(1)


@pytest.mark.parametrize("shape, steps", [((4, 4), 6), ((8, 8), 6), ((6, 9), 5), ((16, 16), 8), ((10,), 4),
                                          ((28,), 5), ((4, 4, 4), 9)])
def test_trivance_l_shrinks_other_sides_to_a_power_of_three(shape, steps):
    pat, _ = metrics("trivance-l", shape)  # verified exactly
    assert pat.num_steps == steps


def test_trivance_l_fold_of_8_by_hand():
    from reactccl.algorithms.shrink import triples_fold
    target, real = triples_fold(8)  # m = 3, rem = 5: two triples and one pair
    assert target.tolist() == [1, 1, 1, 4, 4, 4, 7, 7] and real.tolist() == [1, 4, 7]
    p = generate("trivance-l", 8, shape=(8,))
    flows = sorted(set(zip(p.step.tolist(), p.src.tolist(), p.dst.tolist(), p.op.tolist())))
    assert [f for f in flows if f[0] == 0] == [(0, 0, 1, 0), (0, 2, 1, 0), (0, 3, 4, 0), (0, 5, 4, 0), (0, 6, 7, 0)]
    assert [f[1:3] for f in flows if f[0] == 1] == [(1, 4), (1, 7), (4, 1), (4, 7), (7, 1), (7, 4)]
    assert [f for f in flows if f[0] == 2] == [(2, 1, 0, 1), (2, 1, 2, 1), (2, 4, 3, 1), (2, 4, 5, 1), (2, 7, 6, 1)]


def test_shrink_rejects_a_fold_that_is_not_one_hop():
    from reactccl.algorithms.shrink import shrink_flows
    geom = TorusGeometry((6,))
    bad = (np.array([3, 1, 3, 3, 4, 5]), np.array([1, 3, 4, 5]))  # 0 would fold into 3, three hops away
    with pytest.raises(PatternError, match="dimension 0 \\(side 6\\)"):
        shrink_flows(geom, [bad], 1, tuple(np.zeros(0, np.int64) for _ in range(5)))


def test_ring_and_rd():
    assert sorted(hamiltonian_cycle((5, 5)).tolist()) == list(range(25))
    for shape in [(4, 6), (5, 6), (5, 5), (6, 3)]:
        cyc = hamiltonian_cycle(shape)
        g = TorusGeometry(shape)
        assert (g.distance(cyc, np.roll(cyc, -1)) == 1).all()
    pat, d = metrics("torus-ring", (4, 4))
    # two edge-disjoint Hamiltonian cycles, both ways: balanced multiport ring
    assert pat.num_steps == 30 and (d.psi, d.theta, d.omega) == pytest.approx((1, 1, 1))
    a, b = disjoint_cycles(5)
    ea = {frozenset(e) for e in zip(a.tolist(), np.roll(a, -1).tolist())}
    eb = {frozenset(e) for e in zip(b.tolist(), np.roll(b, -1).tolist())}
    assert len(ea) == len(eb) == 25 and not ea & eb
    pat, d = metrics("torus-ring", (4, 6))
    assert d.omega == pytest.approx(2)
    rd = generate("rd-allreduce", 16)
    d = deficiency(rd, TorusGeometry((4, 4)))
    # 4 steps, whole vector each: Ψ = 16*4 / 30; XOR 1 and 4 are 1 hop, XOR 2 and 8 are 2 hops (n = 4)
    assert rd.num_steps == 4 and d.psi == pytest.approx(64 / 30)
    assert d.theta == pytest.approx((1 + 1 + 2 + 2) / 4)


def test_baselines_on_hyperx_one_hop():
    pat, d = metrics("swing-b", (8, 8), geom=HyperXGeometry((8, 8)))
    assert d.theta == pytest.approx(1)


def test_torus_ring_refuses_3d():
    with pytest.raises(PatternError, match="2-D tori only"):
        generate("torus-ring", 64, shape=(4, 4, 4))


def test_pack_of_a_pattern_without_flows():
    from reactccl.algorithms.torus_common import pack
    from reactccl.pattern import verify
    q = pack(generate("ring", 1))
    verify(q)
    assert (q.num_flows, q.num_chunks) == (0, 1)


@pytest.mark.parametrize("shape, q", [((4, 4), 0.5), ((6, 6), 11 / 18), ((16, 16), 0.828125), ((9, 9), 16 / 27)])
def test_trivance_b_splits_ties_between_its_two_ports(shape, q):
    # a block in the shares of both peers goes to the less loaded port: on 6x6 node 0 sends
    # 9 blocks to each of its four step-0 peers (before: 18 to node 6, 0 to node 30, Q = 0.972 N)
    pat, d = metrics("trivance-b", shape)  # verified exactly
    assert d.psi == pytest.approx(1) and d.q == pytest.approx(q, rel=1e-12)
    if shape == (6, 6):
        m = (pat.step == 0) & (pat.src == 0)
        assert sorted(np.unique(pat.dst[m], return_counts=True)[1].tolist()) == [9, 9, 9, 9]
        assert sorted(np.unique(pat.dst[m]).tolist()) == [1, 5, 6, 30]
        assert d.omega == pytest.approx(1.0233, abs=1e-4)


def test_balanced_intrees_needs_translation_invariant_peers():
    from reactccl.algorithms.torus_common import balanced_intrees
    geom = TorusGeometry((4, 4))
    peers = [np.stack([np.roll(np.arange(16), 1), np.arange(16)])]  # not a torus translation pattern
    peers[0][0, 3] = 7
    with pytest.raises(PatternError, match="peers of step 0 do not commute"):
        balanced_intrees(geom, peers)


@pytest.mark.parametrize("n, steps", [(1, 0), (2, 1), (3, 3), (5, 4), (6, 4), (7, 4), (8, 3), (12, 5), (16, 4)])
def test_rd_allreduce_folds_like_mpich(n, steps):
    # floor(log2 n) + 2 steps off a power of two (MPICH allreduce_intra_recursive_doubling.c)
    assert generate("rd-allreduce", n).num_steps == steps  # verified exactly on the way out


def test_rd_allreduce_fold_n6_flows():
    # pof2 = 4, rem = 2: 0 -> 1 and 2 -> 3 add in; new ranks 0..3 are real 1, 3, 4, 5
    p = generate("rd-allreduce", 6)
    flows = sorted(zip(p.step.tolist(), p.src.tolist(), p.dst.tolist(), p.op.tolist()))
    assert flows == [(0, 0, 1, 0), (0, 2, 3, 0),
                     (1, 1, 3, 0), (1, 3, 1, 0), (1, 4, 5, 0), (1, 5, 4, 0),
                     (2, 1, 4, 0), (2, 3, 5, 0), (2, 4, 1, 0), (2, 5, 3, 0),
                     (3, 1, 0, 1), (3, 3, 2, 1)]

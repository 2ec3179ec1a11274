"""Compact (symmetry) forms of the torus schedules: same deficiency as the materialised,
exactly verified pattern; hand-computed values at 64x64; the structural checks fail loudly."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.compact import check_intrees, compact_schedule
from reactccl.algorithms.swing import swing_peers
from reactccl.algorithms.torus_common import reach_intrees
from reactccl.cost.deficiency import deficiency
from reactccl.cost.symmetric import compact_deficiency
from reactccl.experiments.sp_goodput import Fabric, goodput_sweep
from reactccl.pattern import PatternError
from reactccl.topology.torus import TorusGeometry

CASES = [("sp-allreduce", {}), ("k-sp-allreduce", {"k": 3}), ("bucket", {}), ("swing-b", {}), ("trivance-b", {})]


SHAPES = [(8, 8), (6, 6), (5, 5), (9, 9), (12, 8), (4, 4, 4)]


@pytest.mark.parametrize("shape, name, opts", [
    (s, n, o) for s in SHAPES for n, o in CASES if len(set(s)) == 1 or n not in ("sp-allreduce", "k-sp-allreduce")])
def test_compact_equals_materialised(shape, name, opts):
    p, geom = int(np.prod(shape)), TorusGeometry(shape)
    full = generate(name, p, shape=shape, **opts)  # verified exactly
    cs = compact_schedule(name, p, shape=shape, **opts)
    a, b = deficiency(full, geom), compact_deficiency(cs)
    assert cs.num_flows == full.num_flows and cs.num_chunks == full.num_chunks
    assert (a.rounds, a.max_hops) == (b.rounds, b.max_hops)
    np.testing.assert_allclose(b.max_load, a.max_load, rtol=1e-12)
    assert b.vol_abs == pytest.approx(a.vol_abs, rel=1e-12) and b.vol_phys == pytest.approx(a.vol_phys, rel=1e-12)
    assert b.omega == pytest.approx(a.omega, rel=1e-12)


def test_rectangular_sp_has_no_compact_form():
    # two BFS trees under translations and reflection (§6.1): only the full generator builds it
    with pytest.raises(PatternError, match=r"equal sides only \(got \(12, 8\)\)"):
        compact_schedule("sp-allreduce", 96, shape=(12, 8))


def test_sp_and_bucket_64x64_are_optimal_in_volume():
    for name, S in (("sp-allreduce", 128), ("bucket", 252)):  # 2H = 2*64; 2d(n-1) = 4*63
        d = compact_deficiency(compact_schedule(name, 4096))
        assert d.rounds == S
        assert (d.psi, d.theta, d.omega) == pytest.approx((1.0, 1.0, 1.0), rel=1e-12)
        assert d.q == pytest.approx(2 * 4095 / (4 * 4096), rel=1e-12)  # V_min / |E|


def test_swing_b_64x64_theta_by_hand():
    # each of the 4 collectives alternates dimensions; step s sends 1/2^(s+1) of its part over
    # |rho(s // 2)| hops (rho = 1, -1, 3, -5, 11, -21): Theta = sum hops*vol / sum vol
    rho = [1, 1, 3, 5, 11, 21]
    vol = np.array([0.5 ** (s + 1) for s in range(12)])
    hops = np.array([rho[s // 2] for s in range(12)])
    d = compact_deficiency(compact_schedule("swing-b", 4096))
    assert d.rounds == 24 and d.theta == pytest.approx((hops * vol).sum() / vol.sum(), rel=1e-12)


def test_goodput_64x64_sp_over_bucket_at_64kib_by_hand():
    run = goodput_sweep(Fabric("torus", (64, 64)), ["SP", "Bucket"], [64 * 1024], engine="auto", log=None)
    assert run.meta["engine"] == "model" and set(run.meta["by_symmetry"]) == {"sp-allreduce", "bucket"}
    g = {r["family"]: r for r in run.best}
    band = 2 * 4095 / (4 * 4096) * 64 * 1024 * 8 / 400e9  # Q x N / link rate, the same for both
    assert g["SP"]["time"] == pytest.approx(128 * 400e-9 + band, rel=1e-12)
    assert g["Bucket"]["time"] == pytest.approx(252 * 400e-9 + band, rel=1e-12)


def test_netsim_refuses_a_fabric_it_cannot_hold():
    with pytest.raises(ValueError, match="64x64: 4096 nodes.*engine 'model'"):
        goodput_sweep(Fabric("torus", (64, 64)), ["SP"], [1024], engine="netsim", log=None)


def test_swing_needs_its_period_of_two():
    from reactccl.algorithms.compact import _check_equivariant
    geom = TorusGeometry((8, 8))
    peers = swing_peers(geom, 0)
    _check_equivariant(geom, peers, (2, 2))
    with pytest.raises(PatternError, match=r"step 0: the peers do not commute with the translation by 1 in dimension 0"):
        _check_equivariant(geom, peers, (1, 1))


def test_check_intrees_names_block_and_node():
    geom = TorusGeometry((4, 4))
    blocks = np.array([0, 5])
    parent, step = reach_intrees(swing_peers(geom, 0), blocks)
    check_intrees(parent, step, 4, blocks)
    bad = parent.copy()
    bad[1, 5] = 3
    with pytest.raises(PatternError, match="block 5: its owner sends its partial to node 3"):
        check_intrees(bad, step, 4, blocks)
    late = step.copy()
    u = int(np.flatnonzero((parent[0] >= 0) & (parent[0] != 0))[0])
    late[0, parent[0, u]] = late[0, u]  # the parent sends in the same step as its child
    with pytest.raises(PatternError, match=f"block 0: node {u} sends at step"):
        check_intrees(parent, late, 4, blocks)
    orphan = parent.copy()
    orphan[0, u] = -1
    with pytest.raises(PatternError, match=f"block 0: node {u} sends to -1"):
        check_intrees(orphan, step, 4, blocks)


def test_cli_metrics_64x64_by_symmetry(capsys):
    from reactccl.cli.main import main
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:64x64"]) == 0
    out = capsys.readouterr().out
    assert "134184960 flows (by symmetry), S = 128 rounds" in out and "Omega = 1.0000" in out


def test_compact_options_typed_like_generate():
    # text from a command line: "10" is the int 10, "2.5" is named as a bad option
    assert compact_schedule("k-sp-allreduce", 4096, k="10").name == "k-sp-allreduce k=10 64x64"
    with pytest.raises(PatternError, match="option k: expected an integer, got '2.5'"):
        compact_schedule("k-sp-allreduce", 4096, k="2.5")
    with pytest.raises(PatternError, match="bucket with 4 ranks: torus: every side must be >= 3"):
        compact_schedule("bucket", 4)


def test_cli_metrics_64x64_names_a_bad_option(capsys):
    from reactccl.cli.main import main
    assert main(["sp", "metrics", "k-sp-allreduce", "--fabric", "torus:64x64", "--option", "k=2.5"]) == 2
    assert "option k: expected an integer, got '2.5'" in capsys.readouterr().err

"""k-SP-allreduce: hop-constrained trees, W(T), Θ = W/(p-1), rounds 2h(T) (SP-allreduce §5, NOTES.md)."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.kspt import ksp_tree, layer_thresholds
from reactccl.algorithms.torus_common import tree_depth
from reactccl.cost.deficiency import deficiency
from reactccl.pattern import PatternError
from reactccl.topology.torus import TorusGeometry

LAYERS_8X8 = [1, 4, 8, 12, 14, 12, 8, 4, 1]


def test_thresholds_hand_computed():
    assert layer_thresholds(LAYERS_8X8, 1) == ([0, 8], 256)  # star: Σ D N_D
    # (4 + 16 + 36) + (14*1 + 12*2 + 8*3 + 4*4 + 1*5)
    assert layer_thresholds(LAYERS_8X8, 2) == ([0, 3, 8], 139)
    assert layer_thresholds(LAYERS_8X8, 8) == (list(range(9)), 63)
    assert layer_thresholds(LAYERS_8X8, 20)[1] == 63
    with pytest.raises(PatternError, match="k must be"):
        layer_thresholds(LAYERS_8X8, 0)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_ksp_8x8(k):
    g = TorusGeometry((8, 8))
    parent, L, W = ksp_tree(g, k)
    depth = tree_depth(parent)
    assert depth.max() == len(L) - 1 <= k
    # every tree edge is a shortest-path segment: dist(u, root) = dist(u, parent) + dist(parent, root)
    u = np.arange(1, 64)
    d0 = g.distance(np.zeros(63, int), u)
    assert (d0 == g.distance(u, parent[u]) + g.distance(np.zeros(63, int), parent[u])).all()
    assert g.distance(u, parent[u]).sum() == W
    pat = generate("k-sp-allreduce", 64, k=k)
    d = deficiency(pat, g)
    assert pat.num_steps == 2 * depth.max()
    assert d.psi == pytest.approx(1)
    assert d.theta == pytest.approx(W / 63)
    if k >= 2:
        assert d.omega == pytest.approx(1)


def test_ksp_3d():
    pat = generate("k-sp-allreduce", 64, k=3, dims=3)
    assert pat.num_steps <= 6

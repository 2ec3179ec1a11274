"""The two fluid engines against each other and against the from-scratch oracle on random cases.

Each case (``tests/engine_cases.py``) is one epoch of a random collective on a random fabric
(fat-tree, leaf-spine, Alibaba-style, torus) with 8-128 ranks, background flows, a periodic source
and degraded cables. Always: both engines' rates equal the oracle's progressive filling at sampled
points of their own runs. End to end (flow end times to 1e-9, event counts): on every case whose
own conditioning allows it, i.e. where perturbing the link capacities by 1e-13 moves no flow end by
more than 1e-8 in the reference engine alone. Contended runs of many steps amplify round-off
(``test_the_issue_case_is_ill_conditioned``): there the engines differ as much as one engine does
from itself under a 1e-13 perturbation, while every allocation is still exact.
"""

import numpy as np
import pytest
from engine_cases import ILL, allocation_errors, capture, compare, conditioning, describe, random_case

from reactccl.netsim import FluidEngine

ALLOC_TOL = 1e-12     # the engines keep a rate that moved by <= 1e-12 relative (RATE_TOL)
CI_SEEDS = range(40)
ILL_CI = {33, 36}        # the CI seeds whose cases amplify a 1e-13 perturbation past 1e-8


def _check(seed: int, max_ranks: int) -> dict:
    kw = random_case(seed, max_ranks)
    r = compare(kw)
    where = describe(kw)
    assert r["replay"], where
    for engine, err in r["alloc"].items():
        assert err <= ALLOC_TOL, f"{engine} engine: rates off the oracle's by {err:.3g} ({where})"
    if r["probe"] <= ILL:
        assert r["diff"] <= 1e-9, f"end times differ by {r['diff']:.3g} on a well-conditioned case ({where})"
        assert r["events"][0] == r["events"][1], where
    return r


@pytest.mark.parametrize("seed", CI_SEEDS)
def test_engines_agree_on_random_cases(seed):
    r = _check(seed, 64)
    assert (r["probe"] > ILL) == (seed in ILL_CI), f"probe {r['probe']:.3g}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40, 100))
def test_engines_agree_on_more_random_cases(seed):
    _check(seed, 128)


@pytest.mark.slow
def test_the_issue_case_is_ill_conditioned():
    """Issue 33's case: ring, 64 ranks, fat-tree k=8, random placement (seed 1), 20 MB. The engines end
    at 8.0490 and 8.0998 ms with flows up to 8% apart, yet both allocations equal the oracle's
    wherever sampled, and the reference alone moves as far when the capacities move by 1e-13."""
    kw = {"algorithm": "ring", "ranks": 64, "topology": "fat-tree:k=8", "size": 20e6, "epochs": 1,
          "placement": "random", "seed": 1, "ports": 4, "order": "step"}
    case = capture(kw)
    for engine in ("python", "compiled"):
        assert max(allocation_errors(case, engine, [1000, 5000, 9000, 13000])) <= ALLOC_TOL
    assert conditioning(case, 1) > 1e-2
    eng = case.build(FluidEngine)
    assert eng.run() == pytest.approx(8.0490e-3, rel=1e-4)
    assert np.isfinite(eng.end).all()

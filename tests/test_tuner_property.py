"""Property: every sequence of transforms drawn from REACT's viable sets keeps the pattern correct.

2,500 seeded random sequences of 1-3 swaps on tree, ring and recursive-doubling patterns at
several sizes (about 300 per pattern, some 5,000 swaps, ~6 s; the earlier 10,000 took 25-60 s and
passed as well); each swap is drawn from what the tuner offers for the current pattern (① any pair,
②/③ from its viable sets, carried through relabellings or recomputed), and each result is checked
with :func:`verify`.
"""

import numpy as np

from reactccl.algorithms import generate
from reactccl.pattern import verify
from reactccl.tuner import Placement, Swap, Transform, ViableSwaps

CASES = [("nccl-tree", n) for n in (4, 5, 8)] + [("ring", n) for n in (3, 4, 6)] + \
        [("recursive-doubling", n) for n in (4, 8)]
SEQUENCES = 2_500


def _draw(rng, pl: Placement, viable: ViableSwaps) -> Swap:
    n = pl.original.num_ranks
    graphs = np.unique(pl.pattern.flow_graph)
    for _ in range(8):
        kind = rng.integers(1, 4)
        if kind == 1 and pl.supports_global:
            a, b = rng.choice(n, 2, replace=False)
            return Swap(Transform.GLOBAL, int(a), int(b))
        g = int(rng.choice(graphs))
        s = viable.for_graph(pl, g)
        idx = np.flatnonzero(s.full == (kind == 2))
        if idx.size:
            i = int(rng.choice(idx))
            if kind == 2:
                return Swap(Transform.CHUNK, int(s.a[i]), int(s.b[i]), g)
            return Swap(Transform.POSITION, int(s.a[i]), int(s.b[i]), g, int(s.t0[i]), int(s.t1[i]))
    a, b = rng.choice(n, 2, replace=False)
    return Swap(Transform.GLOBAL, int(a), int(b))


def test_random_transform_sequences_stay_correct():
    rng = np.random.default_rng(2026)
    start = {c: Placement(generate(*c)) for c in CASES}
    memo: dict = {}
    kinds = np.zeros(4, dtype=int)
    checked = 0
    for k in range(SEQUENCES):
        case = CASES[k % len(CASES)]
        pl = start[case]
        viable = ViableSwaps(memo=memo)
        for _ in range(int(rng.integers(1, 4))):
            sw = _draw(rng, pl, viable)
            viable.update(pl, sw)
            pl = pl.apply(sw)
            verify(pl.pattern)      # building Placement.pattern verifies too
            kinds[int(sw.kind)] += 1
            checked += 1
    assert checked >= SEQUENCES
    assert kinds[1] > 0 and kinds[2] > 0 and kinds[3] > 0

"""Generic baselines placed on a torus: Hamiltonian ring, recursive doubling, Rabenseifner.

``rd-allreduce`` (recursive-doubling AllReduce, whole vector to the XOR partner each step,
MPICH's fold for other n) is defined here because the generic ``recursive-doubling``
generator is an AllGather.

The generic generators (``ring``, ``recursive-doubling``, ``rabenseifner``) number ranks
0..p-1; on a torus rank r runs on node r (row-major coordinates, :class:`TorusGeometry`),
so their patterns route as they are. Only the ring needs a placement: ``torus-ring`` lays
rings along Hamiltonian cycles of the torus (every ring hop is one link): on n x n two
edge-disjoint cycles, each both ways (balanced multiport, Ω = 1); otherwise one cycle both ways.

Hamiltonian cycle of ``m x n`` (node = n*x + y): a snake (rows alternately left-right and
right-left, closing through the wrap link of column 0) when m is even, the transposed snake
when n is even, and the diagonal spiral ``(x, (j - x) mod n)`` when m is a multiple of n.

Source: SP-allreduce §2.4 (Hamiltonian ring), BASELINES.md (ring, recursive doubling).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ..topology.torus import TorusGeometry
from ._build import check_int_option
from .recursive import fold_ranks
from .registry import generate, register
from .torus_common import assemble, combine, parse_shape

__all__ = ["hamiltonian_cycle", "disjoint_cycles", "torus_ring", "rd_allreduce"]


def hamiltonian_cycle(shape: Sequence[int]) -> np.ndarray:
    """Node ids of a Hamiltonian cycle of the 2-D torus ``shape`` (consecutive entries and
    the last/first pair are neighbours), shape ``(m*n,)``.

    Raises:
        PatternError: not 2-D, or both sides odd and m not a multiple of n.
    """
    if len(shape) != 2:
        raise PatternError(f"hamiltonian_cycle: 2-D torus expected, got {tuple(shape)}")
    m, n = shape
    x = np.repeat(np.arange(m), n)
    j = np.tile(np.arange(n), m)
    if m % 2 == 0:
        y = np.where(x % 2 == 0, j, n - 1 - j)
        return x * n + y
    if n % 2 == 0:
        cyc = hamiltonian_cycle((n, m))
        return (cyc % m) * n + cyc // m
    if m % n == 0:
        return x * n + (j - x) % n
    raise PatternError(f"hamiltonian_cycle: no construction here for odd sides {tuple(shape)}")


def disjoint_cycles(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two edge-disjoint Hamiltonian cycles of the n x n torus that together use every
    cable: the diagonal spiral A = ``(x, (j - x) mod n)`` and its transpose B. A skips, in
    row x, the wrap cable ``(x, n-1-x) - (x, n-x)`` and turns down the cable
    ``(x, n-1-x) - (x+1, n-1-x)``; B uses exactly the skipped cables and skips exactly
    the turning ones. Returns ``(A, B)``, node ids, each shape ``(n*n,)``."""
    x = np.repeat(np.arange(n), n)
    j = np.tile(np.arange(n), n)
    a = x * n + (j - x) % n
    return a, (a % n) * n + a // n


@register("torus-ring", "allreduce", "ring AllReduce along Hamiltonian cycles of a 2-D torus (4 rings on n x n)")
def torus_ring(num_ranks: int, shape: Sequence[int] | None = None) -> CollectivePattern:
    """Ring AllReduce on Hamiltonian cycles, ``2(p-1)`` steps, every transmission one hop.

    On ``n x n`` the two edge-disjoint cycles of :func:`disjoint_cycles`, each run both ways,
    give four rings on a quarter of the message each: every directed link carries one ring
    in every step (balanced multiport, Ψ = Θ = Ω = 1, SP-allreduce §2.4). Otherwise one
    cycle (:func:`hamiltonian_cycle`) both ways on half the message each (Ω = 2).

    Raises:
        PatternError: not a 2-D torus; see :func:`hamiltonian_cycle`.
    """
    shp = parse_shape(num_ranks, shape, 2)
    if len(shp) != 2:
        raise PatternError(f"torus-ring: Hamiltonian cycles are built for 2-D tori only, got {shp}")
    TorusGeometry(shp)
    cycles = list(disjoint_cycles(shp[0])) if shp[0] == shp[1] else [hamiltonian_cycle(shp)]
    ring = generate("ring", num_ranks, check=False)
    parts = [ring.relabel(c) for cyc in cycles for c in (cyc, cyc[::-1].copy())]
    return combine(parts, name=f"torus-ring {shp[0]}x{shp[1]}")


@register("rd-allreduce", "allreduce",
          "recursive-doubling AllReduce: whole vector to the XOR partner every step; MPICH's fold for other n")
def rd_allreduce(num_ranks: int) -> CollectivePattern:
    """Recursive-doubling AllReduce (MPICH ``allreduce_intra_recursive_doubling.c``, its
    short-message algorithm): at step s rank r adds its whole vector into ``r XOR 2^s``; one
    chunk. On a torus rank r is node r.

    Other n fold as MPICH does (:func:`~.recursive.fold_ranks`): with pof2 the largest power
    of two <= n and rem = n - pof2, each even r < 2 rem first adds its vector into r+1 and
    sits out; the pof2 ranks left (odd r < 2 rem as new rank r/2, r >= 2 rem as r - rem) run
    the power-of-two exchange; finally each odd r < 2 rem copies the result to r-1. Steps:
    log2 n for a power of two, floor(log2 n) + 2 otherwise (n = 3: 3; 5..7: 4; 12: 5); n = 1
    has no flows. Example n = 3: step 0 0->1; step 1 1<->2; step 2 1->0.

    Raises:
        PatternError: num_ranks not an integer >= 1.
    """
    n = check_int_option("num_ranks", num_ranks)
    pof2, rem, real = fold_ranks(n)
    L = pof2.bit_length() - 1
    off = 1 if rem else 0
    evens = 2 * np.arange(rem, dtype=np.int64)
    q = np.arange(pof2, dtype=np.int64)
    step = [np.zeros(rem, np.int64)] + [np.full(pof2, off + s, np.int64) for s in range(L)]
    src = [evens] + [real] * L
    dst = [evens + 1] + [real[q ^ (1 << s)] for s in range(L)]
    op = [np.zeros(rem + pof2 * L, np.int8), np.ones(rem, np.int8)]
    step.append(np.full(rem, off + L, np.int64))
    src.append(evens + 1)
    dst.append(evens)
    cat = np.concatenate
    flows = (np.zeros(rem * 2 + pof2 * L, np.int64), cat(step), cat(src), cat(dst), cat(op))
    return assemble(n, flows, name=f"rd-allreduce {n}", num_chunks=1)

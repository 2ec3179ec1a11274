"""Recursive doubling AllGather and Rabenseifner's halving-doubling AllReduce (MPICH).

``recursive-doubling`` (AllGather, one chunk graph, chunk c = block c of size 1/n):

* n a power of two: at step s rank r exchanges with ``r XOR 2^s`` the blocks of the aligned
  group of 2^s ranks containing r (data doubles every step), log2 n steps. n = 8::

      step 0: 0<->1 2<->3 4<->5 6<->7   (1 block each way)
      step 1: 0<->2 1<->3 4<->6 5<->7   (blocks of {0,1}, {2,3}, ... : 2 each way)
      step 2: 0<->4 1<->5 2<->6 3<->7   (4 blocks each way)

* other n, ``nonpow2="dissemination"`` (default, Bruck et al. 1997): at step s rank r sends to
  ``r - 2^s mod n`` the blocks ``r, r+1, ..., r+m-1 (mod n)`` with ``m = min(2^s, n - 2^s)``;
  after step s rank r holds blocks r..r+2^(s+1)-1. ceil(log2 n) steps, every rank sends and
  receives once per step and (n-1)/n of the message in all (latency and bandwidth optimal).
* other n, ``nonpow2="fold"`` (MPICH's fold applied to blocks): with pof2 the largest power of
  two <= n and rem = n - pof2, even r < 2 rem first copies its block to r+1; the pof2 ranks
  that remain (odd r < 2 rem, and r >= 2 rem) run the power-of-two scheme on the blocks they
  hold; finally each odd r < 2 rem copies every block but r-1 to r-1. log2(pof2) + 2 steps.

``rabenseifner`` (AllReduce, one chunk graph, pof2 chunks of size 1/pof2): MPICH's fold (even
r < 2 rem reduces its vector into r+1 and sits out; odd r < 2 rem acts as new rank r/2, r >= 2 rem
as r - rem), recursive halving reduce-scatter on new ranks (step k: partner q XOR 2^k, distance
1 first, the lower rank keeps the lower half), recursive doubling allgather in reverse order,
then odd r < 2 rem copies the result to r-1. 2 log2(pof2) steps, + 2 when n is not a power of two.

Source: Thakur, Rabenseifner & Gropp (2005), MPICH ``allgather_intra_recursive_doubling.c`` and
``allreduce_intra_reduce_scatter_allgather.c``; Bruck et al. (1997); REACT A.1.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ._build import ceil_log2, check_int_option, make_pattern
from .registry import register

__all__ = ["recursive_doubling", "rabenseifner", "fold_ranks"]

NONPOW2_SCHEMES = ("dissemination", "fold")


def _ranges(starts: np.ndarray, counts: np.ndarray, modulus: int | None = None) -> np.ndarray:
    """Concatenated ``arange(start, start + count)`` for every flow (optionally mod ``modulus``)."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    offs = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    idx = np.repeat(np.asarray(starts, dtype=np.int64), counts) + offs
    return idx % modulus if modulus else idx


def fold_ranks(n: int) -> tuple[int, int, np.ndarray]:
    """MPICH's fold of n ranks onto a power of two.

    Returns:
        ``(pof2, rem, real)``: pof2 = the largest power of two <= n, rem = n - pof2, and
        ``real`` (shape ``(pof2,)``) the rank that plays new rank q: ``2q+1`` for q < rem,
        ``q + rem`` otherwise.
    """
    pof2 = 1 << (int(n).bit_length() - 1)
    rem = n - pof2
    q = np.arange(pof2, dtype=np.int64)
    return pof2, rem, np.where(q < rem, 2 * q + 1, q + rem)


def _low_bits_offset(q: np.ndarray, nbits: int, pof2: int) -> np.ndarray:
    """Start of the chunk range new rank q holds after ``nbits`` halving steps:
    sum over j < nbits of bit_j(q) * pof2 / 2^(j+1)."""
    lo = np.zeros(len(q), dtype=np.int64)
    for j in range(nbits):
        lo += ((q >> j) & 1) * (pof2 >> (j + 1))
    return lo


def _rd_pow2_flows(n: int, first_step: int, block_lo: np.ndarray, real: np.ndarray):
    """Power-of-two recursive doubling over ``len(real)`` new ranks: at step s new rank q sends to
    q XOR 2^s the real blocks ``[block_lo[a], block_lo[a + 2^s])``, a = q rounded down to 2^s.
    ``block_lo`` has shape ``(pof2+1,)`` (first real block of every new rank, then n)."""
    pof2 = len(real)
    L = pof2.bit_length() - 1
    q = np.arange(pof2, dtype=np.int64)
    steps, src, dst, starts, counts = [], [], [], [], []
    for s in range(L):
        a = (q >> s) << s
        steps.append(np.full(pof2, first_step + s, dtype=np.int64))
        src.append(real[q])
        dst.append(real[q ^ (1 << s)])
        starts.append(block_lo[a])
        counts.append(block_lo[a + (1 << s)] - block_lo[a])
    return steps, src, dst, starts, counts


@register("recursive-doubling", "allgather",
          "recursive doubling AllGather (XOR partners); dissemination or fold for other n; one chunk graph")
def recursive_doubling(n: int, nonpow2: Literal["dissemination", "fold"] = "dissemination") -> CollectivePattern:
    """Recursive doubling AllGather on ``n`` ranks (schemes in the module docstring).

    Steps: log2 n for a power of two; ceil(log2 n) with ``nonpow2="dissemination"``;
    floor(log2 n) + 2 with ``nonpow2="fold"``.

    Raises:
        PatternError: on a bad ``n`` or an unknown ``nonpow2`` scheme.
    """
    n = check_int_option("n", n)
    if nonpow2 not in NONPOW2_SCHEMES:
        raise PatternError(f"nonpow2: expected one of {NONPOW2_SCHEMES}, got {nonpow2!r}")
    r = np.arange(n, dtype=np.int64)
    pof2, rem, real = fold_ranks(n)
    if rem == 0:
        steps, src, dst, starts, counts = _rd_pow2_flows(n, 0, np.arange(n + 1, dtype=np.int64), r)
        idx = _ranges(np.concatenate(starts), np.concatenate(counts)) if steps else np.zeros(0, np.int64)
        name = "recursive-doubling"
    elif nonpow2 == "dissemination":
        steps, src, dst, starts, counts = [], [], [], [], []
        for s in range(ceil_log2(n)):
            d = 1 << s
            steps.append(np.full(n, s, dtype=np.int64))
            src.append(r)
            dst.append((r - d) % n)
            starts.append(r)
            counts.append(np.full(n, min(d, n - d), dtype=np.int64))
        idx = _ranges(np.concatenate(starts), np.concatenate(counts), modulus=n)
        name = "recursive-doubling(dissemination)"
    else:
        q = np.arange(pof2 + 1, dtype=np.int64)
        block_lo = np.where(q < rem, 2 * q, q + rem)
        evens = 2 * np.arange(rem, dtype=np.int64)
        steps, src, dst, starts, counts = _rd_pow2_flows(n, 1, block_lo, real)
        L = len(steps)
        # fold: even r < 2 rem hands its block to r+1; unfold: odd r < 2 rem returns all blocks but r-1
        steps = [np.zeros(rem, np.int64)] + steps + [np.full(rem, L + 1, np.int64)]
        src = [evens] + src + [evens + 1]
        dst = [evens + 1] + dst + [evens]
        mid = _ranges(np.concatenate(starts), np.concatenate(counts))
        unfold = np.concatenate([np.delete(r, e) for e in evens])
        idx = np.concatenate([evens, mid, unfold])
        counts = [np.ones(rem, np.int64)] + counts + [np.full(rem, n - 1, np.int64)]
        name = "recursive-doubling(fold)"
    if not steps:
        steps = src = dst = counts = [np.zeros(0, np.int64)]
    return make_pattern("allgather", n, np.full(n, 1.0 / n), np.zeros(n, np.int64),
                        np.concatenate(steps), np.concatenate(src), np.concatenate(dst), 1,
                        np.concatenate(counts), idx, name=name)


@register("rabenseifner", "allreduce",
          "halving-doubling AllReduce (MPICH): recursive-halving reduce-scatter, recursive-doubling allgather")
def rabenseifner(n: int) -> CollectivePattern:
    """Rabenseifner's AllReduce with MPICH's fold for non-powers of two (module docstring).

    Raises:
        PatternError: if ``n`` is not an integer >= 1.
    """
    n = check_int_option("n", n)
    pof2, rem, real = fold_ranks(n)
    L = pof2.bit_length() - 1
    q = np.arange(pof2, dtype=np.int64)
    evens = 2 * np.arange(rem, dtype=np.int64)
    off = 1 if rem else 0
    steps, src, dst, starts, counts, ops = [], [], [], [], [], []

    def add(step, s, d, st, cnt, op):
        steps.append(np.full(len(s), step, np.int64))
        src.append(s)
        dst.append(d)
        starts.append(np.broadcast_to(st, (len(s),)))
        counts.append(np.broadcast_to(cnt, (len(s),)))
        ops.append(np.full(len(s), op, np.int8))

    if rem:
        add(0, evens, evens + 1, 0, pof2, 0)                       # fold: reduce whole vector
    for k in range(L):                                             # recursive halving, distance 1 first
        half = pof2 >> (k + 1)
        lo = _low_bits_offset(q, k, pof2)
        upper_sent = ((q >> k) & 1) == 0                           # lower rank keeps the lower half
        add(off + k, real[q], real[q ^ (1 << k)], np.where(upper_sent, lo + half, lo), half, 0)
    for i, b in enumerate(range(L - 1, -1, -1)):                   # recursive doubling, reverse order
        add(off + L + i, real[q], real[q ^ (1 << b)], _low_bits_offset(q, b + 1, pof2), pof2 >> (b + 1), 1)
    if rem:
        add(off + 2 * L, evens + 1, evens, 0, pof2, 1)             # unfold: copy the result back
    if not steps:
        add(0, np.zeros(0, np.int64), np.zeros(0, np.int64), 0, 0, 0)
    counts_all = np.concatenate(counts)
    return make_pattern("allreduce", n, np.full(pof2, 1.0 / pof2), np.zeros(pof2, np.int64),
                        np.concatenate(steps), np.concatenate(src), np.concatenate(dst), np.concatenate(ops),
                        counts_all, _ranges(np.concatenate(starts), counts_all), name="rabenseifner")

"""AllToAll: NCCL's pairwise send/receive and Bruck's log-step exchange.

Layout (:class:`reactccl.pattern.Collective`): the pattern's message is the N x N matrix of
blocks, block ``b = s*N + d`` being what rank s sends to rank d (rank s's input block d, rank
d's output block s). With ``channels = K`` every block is K chunks, chunk ``b*K + j`` in
chunk graph j (NCCL spreads one peer's send over its p2p channels), each ``1/(N^2 K)`` of the
message (``S/(N K)`` bytes for nccl-tests' size S). Every flow is a ``copy``: a block has one
contribution, so nothing is added.

* ``alltoall-pairwise``: every rank sends block (r, d) straight to d, one flow per (r, d,
  channel). ``order`` says when: ``together`` (default) posts all N-1 sends at step 0, as one
  NCCL group of ncclSend/ncclRecv (what ``all_to_all_single`` and nccl-tests' alltoall call)
  posts them; ``shift`` sends to ``(r + k) mod N`` at step k-1 (the classic pairwise
  exchange, receive from ``(r - k) mod N``); ``nccl`` uses NCCL's p2p round order, the
  deltas 0, 1, 3, 6, 10, ... (``delta += round``, modulo the power of two above N, deltas >= N
  skipped; round 0 is the copy to itself): step i sends to ``r + delta_{i+1}``. Under the
  execution model's step order a rank's sends of step t start once its sends of step t-1 (in
  the same channel) have left, as NCCL runs one round after another on a channel.
* ``alltoall-bruck``: ceil(log2 N) steps; at step k every rank sends to ``(r + 2^k) mod N``
  (one flow per channel) every block it holds whose distance ``(d - s) mod N`` has bit k set,
  so block (s, d) travels ``s -> ... -> d`` by the binary digits of its distance and each step
  carries about N/2 blocks: fewer messages (log2 N against N - 1) for more bytes (about
  ``S/2 * log2 N`` per rank against ``S (N-1)/N``), the trade for small messages. Bruck's
  local rotations (before the first and after the last step, and MPICH's copies to pack each
  step's blocks) are renamings here: the IR names every block by its (source, destination),
  so a block never changes position and no flow or copy stands for them (the runtime keeps
  every block at its place of the N x N buffer, see :mod:`reactccl.runtime.alltoall`).

Source: NCCL ``src/init.cc`` (p2p schedule) and ``src/enqueue.cc`` (p2p rounds), nccl-tests
``src/alltoall.cu``; Bruck, Ho, Kipnis, Upfal & Weathersby, "Efficient algorithms for
all-to-all communications in multiport message-passing systems", IEEE TPDS 8(11), 1997;
MPICH ``alltoall_intra_brucks.c``; Thakur, Rabenseifner & Gropp (2005) §3.6.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ._build import ceil_log2, check_int_option, make_pattern
from .registry import register

__all__ = ["alltoall_pairwise", "alltoall_bruck", "nccl_p2p_deltas", "bruck_blocks"]


def nccl_p2p_deltas(n: int) -> np.ndarray:
    """NCCL's p2p round deltas for ``n`` ranks of one GPU each, shape ``(n,)``: round i sends to
    ``(r + delta[i]) mod n`` and receives from ``(r - delta[i]) mod n``. The delta starts at 0
    and grows by the round number modulo the power of two P >= n (so it walks the triangular
    numbers, which visit every residue mod P once); deltas >= n are skipped. n = 16:
    0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8.

    Raises:
        PatternError: ``n`` not an integer >= 1.
    """
    n = check_int_option("n", n)
    P = 1 << ceil_log2(n)
    out, delta = [], 0
    for rnd in range(1, P + 1):
        if delta < n:
            out.append(delta)
        delta = (delta + rnd) & (P - 1)
    return np.asarray(out, dtype=np.int64)


def _blocks(n: int, K: int, s: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ids of blocks (s, d), one row of K per block, and their chunk graphs (0..K-1)."""
    j = np.arange(K, dtype=np.int64)
    return ((s * n + d)[:, None] * K + j[None, :]), np.broadcast_to(j, (len(s), K))


def _pattern(n: int, K: int, step, src, dst, chunks_per_flow: list[np.ndarray], name: str) -> CollectivePattern:
    """A copy-only AllToAll pattern; flow f carries ``chunks_per_flow[f]`` (one chunk graph)."""
    counts = np.array([len(c) for c in chunks_per_flow], dtype=np.int64)
    idx = np.concatenate(chunks_per_flow) if chunks_per_flow else np.zeros(0, np.int64)
    C = n * n * K
    return make_pattern("alltoall", n, np.full(C, 1.0 / C), np.tile(np.arange(K, dtype=np.int64), n * n),
                        step, src, dst, 1, counts, idx, name=name)


@register("alltoall-pairwise", "alltoall",
          "NCCL AllToAll: every rank sends block d to rank d (one group of send/recv; or rounds)")
def alltoall_pairwise(n: int, order: Literal["together", "shift", "nccl"] = "together",
                      channels: int = 1) -> CollectivePattern:
    """Pairwise AllToAll on ``n`` ranks (module docstring): N(N-1) x channels flows of
    ``1/(N^2 channels)`` of the message each; 1 step (``together``) or N-1 steps.

    Args:
        n: ranks (>= 1; n = 1 gives no flows).
        order: ``together``, ``shift`` or ``nccl`` (module docstring).
        channels: chunks (and chunk graphs) per block (>= 1).

    Raises:
        PatternError: bad ``n``, ``order`` or ``channels``.
    """
    n = check_int_option("n", n)
    K = check_int_option("channels", channels)
    if order not in ("together", "shift", "nccl"):
        raise PatternError(f"order: expected together, shift or nccl, got {order!r}")
    deltas = np.arange(1, n, dtype=np.int64) if order != "nccl" else nccl_p2p_deltas(n)[1:]
    r = np.tile(np.arange(n, dtype=np.int64), len(deltas))
    k = np.repeat(np.arange(len(deltas), dtype=np.int64), n)
    d = (r + deltas[k]) % n
    step = np.zeros(len(r), np.int64) if order == "together" else k
    ids, _ = _blocks(n, K, r, d)
    # one flow per (rank, peer, channel)
    fs, fr, fd = np.repeat(step, K), np.repeat(r, K), np.repeat(d, K)
    name = "alltoall-pairwise" + ("" if order == "together" else f"(order={order})") + \
        ("" if K == 1 else f"(channels={K})")
    return _pattern(n, K, fs, fr, fd, list(ids.reshape(-1, 1)), name)


def bruck_blocks(n: int, k: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """The blocks rank ``r`` sends to ``(r + 2^k) mod n`` at Bruck step ``k``: the ``(s, d)`` whose
    distance ``delta = (d - s) mod n`` has bit k set and that ``r`` holds then, i.e.
    ``s = r - (delta mod 2^k)``. Returns ``(s, d)``, each shape ``(m,)``, by distance."""
    delta = np.arange(1, n, dtype=np.int64)
    delta = delta[(delta >> k) & 1 == 1]
    s = (r - (delta & ((1 << k) - 1))) % n
    return s, (s + delta) % n


@register("alltoall-bruck", "alltoall",
          "Bruck AllToAll: ceil(log2 n) steps to r+2^k, ~n/2 blocks each; few messages, for small sizes")
def alltoall_bruck(n: int, channels: int = 1) -> CollectivePattern:
    """Bruck's AllToAll on ``n`` ranks (module docstring): ceil(log2 n) steps, at step k one flow
    per (rank, channel) to ``r + 2^k`` carrying :func:`bruck_blocks`.

    Args:
        n: ranks (>= 1; n = 1 gives no flows).
        channels: chunks (and chunk graphs) per block (>= 1).

    Raises:
        PatternError: bad ``n`` or ``channels``.
    """
    n = check_int_option("n", n)
    K = check_int_option("channels", channels)
    steps, srcs, dsts, chunks = [], [], [], []
    for k in range(ceil_log2(n)):
        for r in range(n):
            s, d = bruck_blocks(n, k, r)
            ids, _ = _blocks(n, K, s, d)
            for j in range(K):
                steps.append(k)
                srcs.append(r)
                dsts.append((r + (1 << k)) % n)
                chunks.append(ids[:, j])
    name = "alltoall-bruck" if K == 1 else f"alltoall-bruck(channels={K})"
    return _pattern(n, K, np.asarray(steps, np.int64), np.asarray(srcs, np.int64), np.asarray(dsts, np.int64),
                    chunks, name)

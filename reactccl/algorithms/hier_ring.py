"""NCCL's ring AllReduce over servers: per channel a chain over NVLink inside each server, servers
joined in server order, channels spread over the NICs.

Channel c orders every server's GPUs the same way (:mod:`.hier`: from the GPU next to NIC
``c mod K`` upwards). Ring position p holds rank ``(p // G) * G + order_c[p % G]``, so inside a
server each GPU sends to the next over NVLink, and the server's last GPU sends to the next
server's first GPU, the one next to NIC ``c mod K``: the only edge of the channel that leaves a
server, and with PXN it leaves on that NIC's rail (``connectRings``: ``next[send[n]] =
recv[n+1]``). Each channel is the flat ring (:mod:`.ring`) on its positions: 2(N-1) steps, N
chunks of ``1/(C N)`` of the message, one chunk graph per channel. 2 servers x 4 GPUs, K = 4,
channels 0 and 1::

    channel 0:  0 -> 1 -> 2 -> 3 => 4 -> 5 -> 6 -> 7 => 0      (=> crosses servers, NIC 0)
    channel 1:  1 -> 2 -> 3 -> 0 => 5 -> 6 -> 7 -> 4 => 1      (NIC 1)

Source: NCCL ``src/graph/connect.cc`` (``ncclTopoPreset``: ``ringRecv = intra[0]``, ``ringSend =
intra[G-1]``; ``connectRings``), ``src/graph/search.cc`` (the intra order), ``src/device/all_reduce.h``
(the ring's step order); BASELINES.md "Servers".
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern
from .hier import ServerShape

__all__ = ["ring_positions", "hier_ring_allreduce"]


def ring_positions(shape: ServerShape, channels: int) -> np.ndarray:
    """Rank at every ring position of every channel, shape ``(C, N)`` int64: row c is channel c's
    ring, position p holding rank ``(p // G) * G + order_c[p % G]``."""
    G, N = shape.gpus, shape.num_ranks
    p = np.arange(N, dtype=np.int64)
    return (p // G) * G + shape.channel_orders(channels)[:, p % G]


def hier_ring_allreduce(shape: ServerShape, channels: int, name: str = "ring") -> CollectivePattern:
    """The hierarchical ring AllReduce (module docstring) on ``shape.num_ranks`` ranks.

    Flows: ``C * 2(N-1) * N``, built in (step, src, dst) order without a per-flow loop: at step s
    (0..2N-3) the rank at position p of channel c sends chunk ``c*N + (p - 1 - s) mod N`` to
    position p+1, reducing for s < N-1 and copying after (the flat ring's rule, whose two phases
    are the same formula mod N). Chunk graph c holds channel c's N chunks.

    Args:
        shape: the servers (:func:`reactccl.algorithms.hier.server_shape`).
        channels: C >= 1.
        name: the pattern's name.

    Returns:
        An unverified pattern (:func:`reactccl.algorithms.generate` verifies it). N = 1: no flows.
    """
    N, C = shape.num_ranks, int(channels)
    perm = ring_positions(shape, C)                                     # (C, N): position -> rank
    pos = np.empty_like(perm)
    np.put_along_axis(pos, perm, np.arange(N, dtype=np.int64)[None, :], axis=1)  # rank -> position
    nxt = np.take_along_axis(perm, (pos + 1) % N, axis=1)               # (C, N): next rank of each rank
    corder = np.argsort(nxt.T, axis=1, kind="stable")                  # (N, C): a rank's channels by dst
    dst_rc = np.take_along_axis(nxt.T, corder, axis=1).ravel()
    pos_rc = np.take_along_axis(pos.T, corder, axis=1).ravel()
    chan_rc = corder.ravel()
    T = 2 * (N - 1)
    per_step = N * C
    F = T * per_step
    step = np.repeat(np.arange(T, dtype=np.int64), per_step)
    src = np.tile(np.repeat(np.arange(N, dtype=np.int64), C), T)
    dst = np.tile(dst_rc, T)
    chunk = (pos_rc[None, :] - 1 - np.arange(T, dtype=np.int64)[:, None]) % N
    chunk += (chan_rc * N)[None, :]
    op = (step >= N - 1).astype(np.int8)
    return CollectivePattern.from_arrays(
        "allreduce", N, np.full(C * N, 1.0 / (C * N)), np.repeat(np.arange(C, dtype=np.int64), N),
        step, src, dst, op, np.arange(F + 1, dtype=np.int64), chunk.ravel(), name=name)

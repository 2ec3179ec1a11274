"""NCCL's chunk size for its tree AllReduce, as the number of pipeline slices per tree.

NCCL cuts a tree AllReduce into chunks that pipeline up and down the tree. With the SIMPLE
protocol a chunk starts at one step of the connection's buffer, ``NCCL_BUFFSIZE / NCCL_STEPS``
= 4 MiB / 8 = 512 KiB, and is halved while the message gives each channel too few chunks to
fill the tree's pipeline: while ``S // (channels * chunk) < 8 * depth`` and the chunk is above
128 KiB, then while ``< 4 * depth`` above 64 KiB, then while ``< depth`` above 32 KiB. The
tree's depth is ``nRanks/nNodes - 1 + log2i(nNodes)``: ``floor(log2 n)`` with one rank per
node, ``G - 1 + floor(log2 S)`` on S servers of G GPUs (the intra-server chain, then the tree
over servers). A channel's share ``S / channels`` then takes ``ceil(share / chunk)`` chunks. The flat
``nccl-tree`` pattern has two chunk graphs (NCCL's two trees, one channel each), so
``channels = 2``; on servers it has C (:mod:`reactccl.algorithms.hier_tree`). One slice is
one chunk.

Examples (n = 16, depth 4): up to 64 KiB: 1 slice; 512 KiB: 4 slices of 64 KiB; 4 MiB: 16 of
128 KiB; 20 MB: 39 of 256 KiB; 128 MiB: 128 of 512 KiB. n = 8 (depth 3), 20 MB: 39 of 256 KiB.

Source: NCCL ``src/enqueue.cc`` (``computeColl``/``getPatternInfo``: the tree ``chunkSize``
loop, stepSize = buffSize / NCCL_STEPS), ``src/include/device.h`` (``NCCL_STEPS`` 8),
``src/init.cc`` (default ``NCCL_BUFFSIZE`` 4 MiB; tree depth), NCCL 2.7-2.19.
"""

from __future__ import annotations

import math

__all__ = ["NCCL_BUFFSIZE", "NCCL_STEPS", "tree_chunk_bytes", "tree_slices"]

NCCL_BUFFSIZE = 4 << 20      # bytes, SIMPLE protocol's default connection buffer
NCCL_STEPS = 8               # buffer slots per connection


def tree_chunk_bytes(size: float, num_ranks: int, channels: int = 2, gpus: int = 1) -> int:
    """NCCL's tree chunk (bytes) for a message of ``size`` bytes on ``num_ranks`` ranks, ``gpus``
    per node (server), ``channels`` channels (module docstring).

    Raises:
        ValueError: ``size`` negative or not finite, ``num_ranks``, ``channels`` or ``gpus``
            below 1, or ``gpus`` not dividing ``num_ranks``.
    """
    if not (isinstance(size, (int, float)) and math.isfinite(size) and size >= 0):
        raise ValueError(f"size: expected a finite number of bytes >= 0, got {size!r}")
    if num_ranks < 1 or channels < 1 or gpus < 1:
        raise ValueError(f"num_ranks, channels and gpus must be >= 1, got {num_ranks}, {channels} and {gpus}")
    if num_ranks % gpus:
        raise ValueError(f"gpus: {gpus} per node do not divide {num_ranks} ranks")
    depth = gpus - 1 + (int(num_ranks) // gpus).bit_length() - 1      # nRanks/nNodes - 1 + log2i(nNodes)
    chunk = NCCL_BUFFSIZE // NCCL_STEPS
    nbytes = int(size)
    for per_depth, smallest in ((8, 128 << 10), (4, 64 << 10), (1, 32 << 10)):
        while nbytes // (channels * chunk) < depth * per_depth and chunk > smallest:
            chunk //= 2
    return chunk


def tree_slices(size: float, num_ranks: int, channels: int = 2, gpus: int = 1) -> int:
    """Pipeline slices per channel NCCL's tree uses for ``size`` bytes: ``ceil(size / channels /
    tree_chunk_bytes(...))``, at least 1 (module docstring; same errors as :func:`tree_chunk_bytes`)."""
    chunk = tree_chunk_bytes(size, num_ranks, channels, gpus)
    return max(1, math.ceil(size / channels / chunk))

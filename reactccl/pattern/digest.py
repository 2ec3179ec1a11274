"""A digest of a pattern that is the same in every process (for agreement checks and caches).

Source: ours.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["pattern_digest"]


def pattern_digest(pattern) -> int:
    """A 63-bit digest of the pattern's arrays (collective, ranks, root, chunk sizes rounded to
    1e-12, chunk graphs, steps, endpoints, ops, chunk lists), equal on every process for equal
    patterns, unlike ``hash``, which Python randomises per process. Used by RCollective's
    agreement check and by the packet engine's replicas to match speculative epochs."""
    h = hashlib.sha1(f"{pattern.collective.value}/{pattern.num_ranks}/{pattern.root}".encode())
    for a in (np.round(pattern.chunk_size, 12), pattern.chunk_graph, pattern.step, pattern.src,
              pattern.dst, pattern.op, pattern.chunk_ptr, pattern.chunk_idx):
        h.update(np.ascontiguousarray(a).tobytes())
    return int.from_bytes(h.digest()[:8], "little") & ((1 << 63) - 1)

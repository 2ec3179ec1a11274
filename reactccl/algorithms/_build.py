"""Small helpers shared by the generators: option checks and CSR assembly from numpy arrays."""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern, PatternError

__all__ = ["check_int_option", "check_root", "csr_ptr", "make_pattern", "ceil_log2", "check_flow_count", "MAX_FLOWS"]

MAX_FLOWS = 50_000_000
"""Most flows a generator builds: the arrays take ~40 bytes per flow (2 GB here), a simulation
~1 KB per flow per epoch, so more is refused before any work (a 1024-rank ring has 2.1 M)."""


def check_flow_count(name: str, flows: int) -> None:
    """PatternError naming ``name``, the flow count and its memory if ``flows`` > :data:`MAX_FLOWS`."""
    flows = int(flows)
    if flows > MAX_FLOWS:
        raise PatternError(f"{name}: would have {flows:,} flows (about {flows * 40 / 1e9:,.1f} GB as arrays, "
                           f"~{flows * 1000 / 1e9:,.0f} GB to simulate); the limit is {MAX_FLOWS:,} flows")


def check_int_option(name: str, value, minimum: int = 1) -> int:
    """``value`` as an int, PatternError naming option ``name`` unless it is an integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise PatternError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def check_root(root, n: int) -> int:
    """``root`` as an int in 0..n-1, PatternError otherwise."""
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < n:
        raise PatternError(f"root: expected a rank in 0..{n - 1}, got {root!r}")
    return int(root)


def ceil_log2(n: int) -> int:
    """Smallest S with 2**S >= n (0 for n = 1)."""
    return (int(n) - 1).bit_length()


def csr_ptr(counts: np.ndarray) -> np.ndarray:
    """CSR offsets, shape ``(F+1,)``, for flows carrying ``counts[f]`` chunks each."""
    ptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


def make_pattern(collective: str, n: int, chunk_size, chunk_graph, step, src, dst, op,
                 chunk_counts, chunk_idx, name: str, root: int | None = None) -> CollectivePattern:
    """Build a pattern from per-flow arrays; ``op`` may be a scalar (0 reduce, 1 copy) or an array.

    Flows are stored sorted by (step, src, dst), a stable order that makes ``show`` readable; the
    chunk lists move with their flows.
    """
    step = np.asarray(step, dtype=np.int64)
    F = len(step)
    op = np.broadcast_to(np.asarray(op, dtype=np.int8), (F,))
    counts = np.asarray(chunk_counts, dtype=np.int64)
    ptr = csr_ptr(counts)
    idx = np.asarray(chunk_idx, dtype=np.int64)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    order = np.lexsort((dst, src, step))
    if F and not np.array_equal(order, np.arange(F)):
        sel = np.repeat(ptr[order], counts[order]) + (np.arange(counts.sum()) - np.repeat(
            csr_ptr(counts[order])[:-1], counts[order]))
        idx = idx[sel]
        step, src, dst, op, counts = step[order], src[order], dst[order], op[order], counts[order]
        ptr = csr_ptr(counts)
    return CollectivePattern.from_arrays(collective, n, chunk_size, chunk_graph, step, src, dst,
                                         np.ascontiguousarray(op), ptr, idx, root=root, name=name)

"""Size of a generator's pattern before it is built, so that a too-large request is refused
with the estimate named instead of running out of memory (issue 11).

``pattern_size(name, n, options)`` gives upper estimates of chunks C and (flow, chunk)
pairs P (flows F <= P); ``generate_bytes`` turns them into bytes: the generator's peak,
measured with tracemalloc at 4 x ``(33 F + 16 P)`` (the IR's arrays: step, src, dst,
chunk_ptr, op per flow, chunk_idx and pair_flow per pair, plus the generators'
temporaries, 2.5-3.8 x on ring, bucket, sp-allreduce, swing, torus-ring, nccl-tree,
binomial, recursive doubling and rabenseifner at 256-4096 ranks), plus what
:func:`reactccl.pattern.verify` needs at least (its bit-planes, see
:func:`reactccl.pattern.verify_bytes`).

The counts bound the generated patterns from above, within 2x (tests/test_generate_guard.py
compares them with every generator's output); unknown generators get no estimate.
"""

from __future__ import annotations

import math

from ..pattern import PatternError, verify_bytes
from .hier import resolve_channels, server_shape
from .nccl_chunks import tree_slices

__all__ = ["pattern_size", "generate_bytes", "GEN_BYTES_PER_FLOW", "GEN_BYTES_PER_PAIR"]

GEN_BYTES_PER_FLOW = 4 * 33
GEN_BYTES_PER_PAIR = 4 * 16


def _log2(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 2))))


def _dims(options: dict) -> int:
    shape = options.get("shape")
    if shape is not None:
        try:
            return max(1, len(shape))
        except TypeError:
            return 1
    d = options.get("dims", 2)
    return d if isinstance(d, int) and d > 0 else 2


def _servers(n: int, options: dict, tree: bool) -> tuple[int, int]:
    """``(G, C)`` of a ring or tree on servers from its options (:mod:`.hier`); the flat
    pattern's ``(1, 1 or 2)`` where the options are flat or wrong (the generator names the error)."""
    flat = (1, 2 if tree else 1)
    if options.get("hierarchy") == "flat":
        return flat
    try:
        shape = server_shape(n, options.get("servers"), options.get("gpus"), options.get("nics"))
        return shape.gpus, resolve_channels(shape, options.get("channels"), tree)
    except PatternError:
        return flat


def pattern_size(name: str, n: int, options: dict) -> tuple[int, int] | None:
    """``(chunks, pairs)`` that generator ``name`` makes for ``n`` ranks (upper estimates),
    or None when there is no formula for it. ``options`` as :func:`generate` passes them."""
    d = _dims(options)
    if name in ("binomial-broadcast", "binomial-reduce"):
        return 1, n
    if name == "nccl-tree":
        gpus, c = _servers(n, options, tree=True)
        s = options.get("slices")
        if s is None and isinstance(options.get("size"), (int, float)):
            try:
                s = tree_slices(options["size"], n, c, gpus)
            except ValueError:
                s = 1
        s = s if isinstance(s, int) and s > 0 else 1
        return c * s, 2 * c * n * s
    if name == "rd-allreduce":
        return 1, n * _log2(n)
    if name in ("recursive-doubling", "ring-allgather", "ring-reducescatter"):
        return n, n * n
    if name == "ring":
        c = _servers(n, options, tree=False)[1]
        return c * n, 2 * c * n * n
    if name in ("rabenseifner", "sp-spineleaf"):
        return n, 2 * n * n
    if name in ("bucket", "k-sp-allreduce", "sp-allreduce", "sp-allreduce-2h1", "sp-hyperx", "swing-b", "torus-ring"):
        return 2 * d * n, 4 * d * n * n
    if name == "trivance-b":
        return d * n, 2 * d * n * n
    if name == "swing-l":
        return 2 * d, 2 * d * n * _log2(n)
    if name == "trivance-l":
        return d, 2 * d * n * _log2(n)
    if name in ("alltoall-pairwise", "alltoall-bruck"):
        k = options.get("channels", 1)
        k = k if isinstance(k, int) and k > 0 else 1
        # bruck: each block moves once per set bit of its distance d = 1..n-1
        bits = (sum(d.bit_count() for d in range(1, n)) if n <= 1 << 20 else (n - 1) * _log2(n)) \
            if name == "alltoall-bruck" else n - 1
        moves = n * bits
        return n * n * k, max(1, moves * k)
    return None


def generate_bytes(name: str, n: int, options: dict, check: bool = True) -> int | None:
    """Peak bytes of generating (and, with ``check``, verifying) ``name`` on ``n`` ranks, or None."""
    size = pattern_size(name, n, options)
    if size is None:
        return None
    chunks, pairs = size
    held = (GEN_BYTES_PER_FLOW + GEN_BYTES_PER_PAIR) * pairs // 4     # the finished pattern's arrays
    gen = 4 * held
    return max(gen, held + verify_bytes(n, chunks, pairs)) if check else gen

"""Ring AllReduce, AllGather and ReduceScatter in NCCL's step order.

Ranks sit on the ring in rank order; rank i sends to i+1 and receives from i-1 (mod n). The
message is n chunks (chunk c is block c, size 1/n), each its own chunk graph. Rank i sends
chunk ``i-1-t`` at reduce-scatter step t (t = 0..n-2, reduce), so rank c ends the
reduce-scatter holding chunk c complete; it then sends chunk ``i-u`` at allgather step u
(u = 0..n-2, copy). AllReduce = both phases, 2(n-1) steps. n = 4, AllReduce::

    step   0      1      2    | 3      4      5
    0->1   c3+    c2+    c1+  | c0=    c3=    c2=
    1->2   c0+    c3+    c2+  | c1=    c0=    c3=
    2->3   c1+    c0+    c3+  | c2=    c1=    c0=
    3->0   c2+    c1+    c0+  | c3=    c2=    c1=

On servers (``gpus=G`` > 1 or ``channels=C`` > 1) ``ring`` is NCCL's hierarchical ring
(:mod:`.hier_ring`).

Source: NCCL ring AllReduce (``src/device/all_reduce.h``: send chunk i-1, then n-2 times
receive-reduce-send, then receive-reduce-keep-send, then n-2 times receive-keep-send);
Patarasuk & Yuan (2009); REACT A.1.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..pattern import CollectivePattern, PatternError
from ._build import check_int_option, make_pattern
from .hier import resolve_channels, server_shape
from .hier_ring import hier_ring_allreduce
from .registry import register

__all__ = ["ring_allreduce", "ring_allgather", "ring_reducescatter", "ring_phase"]


def ring_phase(n: int, first_step: int, lag: int, op: int) -> tuple[np.ndarray, ...]:
    """One ring pass of n-1 steps: rank i sends chunk ``(i - lag - t) mod n`` to i+1 at step
    ``first_step + t`` for t = 0..n-2.

    Returns:
        ``(step, src, dst, op, chunk)`` arrays of shape ``(n*(n-1),)``, flows grouped by step.
    """
    t = np.repeat(np.arange(n - 1, dtype=np.int64), n)
    i = np.tile(np.arange(n, dtype=np.int64), n - 1)
    return (first_step + t, i, (i + 1) % n, np.full(len(t), op, dtype=np.int8), (i - lag - t) % n)


def _ring_pattern(collective: str, n: int, phases: list[tuple[np.ndarray, ...]], name: str) -> CollectivePattern:
    step, src, dst, op, chunk = (np.concatenate(parts) for parts in zip(*phases, strict=True))
    return make_pattern(collective, n, np.full(n, 1.0 / n), np.arange(n), step, src, dst, op,
                        np.ones(len(step), dtype=np.int64), chunk, name=name)


@register("ring", "allreduce", "NCCL ring: reduce-scatter n-1 steps, then allgather n-1 steps; n chunk graphs; "
          "with gpus=G a chain per server, servers in order, one ring per channel over the NICs")
def ring_allreduce(n: int, servers: int | None = None, gpus: int | None = None, nics: int | None = None,
                   channels: int | None = None, hierarchy: Literal["servers", "flat"] = "servers") -> CollectivePattern:
    """Ring AllReduce on ``n`` ranks: flat (see the module docstring: 2(n-1) steps, n(n-1) flows
    per phase, each flow 1/n of the message, chunk c its own chunk graph; n = 1: no flows) unless
    the ranks sit on servers of several GPUs or several channels are asked for, then NCCL's
    hierarchical ring (:func:`reactccl.algorithms.hier_ring.hier_ring_allreduce`: per channel a
    chain inside each server, servers in order, one chunk graph per channel).

    Args:
        n: ranks (>= 1).
        servers, gpus: S and G with S x G = n (:func:`reactccl.algorithms.hier.server_shape`);
            neither: one GPU per server.
        nics: K NICs per server, 1..G (default G).
        channels: C (default K: one ring per NIC; channel c enters each server on NIC c mod K).
        hierarchy: ``"servers"`` (default) builds on the server shape; ``"flat"`` the flat ring
            whatever the server options (it takes no ``channels``).

    With G = 1 and C = 1 (the defaults without server options) the pattern is the flat ring,
    exactly.

    Raises:
        PatternError: on a bad option, naming it.
    """
    n = check_int_option("n", n)
    shape = server_shape(n, servers, gpus, nics)
    if hierarchy == "flat":
        if channels is not None:
            raise PatternError("channels: hierarchy=flat builds the flat ring (one chunk graph per chunk); "
                               "drop channels")
        return _flat_ring(n)
    C = resolve_channels(shape, channels, tree=False)
    if shape.gpus == 1 and C == 1:
        return _flat_ring(n)
    return hier_ring_allreduce(shape, C, name=f"ring(servers={shape.servers},gpus={shape.gpus},"
                                             f"nics={shape.nics},channels={C})")


def _flat_ring(n: int) -> CollectivePattern:
    return _ring_pattern("allreduce", n, [ring_phase(n, 0, 1, 0), ring_phase(n, n - 1, 0, 1)], "ring")


@register("ring-allgather", "allgather", "ring AllGather: n-1 steps, rank i forwards block i-t to i+1")
def ring_allgather(n: int) -> CollectivePattern:
    """Ring AllGather: at step t (0..n-2) rank i copies block ``i-t`` to rank i+1 (n-1 steps).

    Raises:
        PatternError: if ``n`` is not an integer >= 1.
    """
    n = check_int_option("n", n)
    return _ring_pattern("allgather", n, [ring_phase(n, 0, 0, 1)], "ring-allgather")


@register("ring-reducescatter", "reducescatter",
          "ring ReduceScatter: n-1 steps, rank i adds block i-1-t into rank i+1")
def ring_reducescatter(n: int) -> CollectivePattern:
    """Ring ReduceScatter: at step t (0..n-2) rank i reduces block ``i-1-t`` into rank i+1, so
    rank c ends with block c complete (n-1 steps).

    Raises:
        PatternError: if ``n`` is not an integer >= 1.
    """
    n = check_int_option("n", n)
    return _ring_pattern("reducescatter", n, [ring_phase(n, 0, 1, 0)], "ring-reducescatter")

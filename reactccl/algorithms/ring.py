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

Source: NCCL ring AllReduce (``src/device/all_reduce.h``: send chunk i-1, then n-2 times
receive-reduce-send, then receive-reduce-keep-send, then n-2 times receive-keep-send);
Patarasuk & Yuan (2009); REACT A.1.
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern
from ._build import check_flow_count, check_int_option, make_pattern
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
    step, src, dst, op, chunk = (np.concatenate(parts) for parts in zip(*phases))
    return make_pattern(collective, n, np.full(n, 1.0 / n), np.arange(n), step, src, dst, op,
                        np.ones(len(step), dtype=np.int64), chunk, name=name)


@register("ring", "allreduce", "NCCL ring: reduce-scatter n-1 steps, then allgather n-1 steps; n chunk graphs")
def ring_allreduce(n: int) -> CollectivePattern:
    """Ring AllReduce on ``n`` ranks (see the module docstring): 2(n-1) steps, n(n-1) flows per
    phase, each flow 1/n of the message. n = 1: no flows.

    Raises:
        PatternError: if ``n`` is not an integer >= 1.
    """
    n = check_int_option("n", n)
    check_flow_count(f"ring on {n} ranks", 2 * n * (n - 1))
    return _ring_pattern("allreduce", n, [ring_phase(n, 0, 1, 0), ring_phase(n, n - 1, 0, 1)], "ring")


@register("ring-allgather", "allgather", "ring AllGather: n-1 steps, rank i forwards block i-t to i+1")
def ring_allgather(n: int) -> CollectivePattern:
    """Ring AllGather: at step t (0..n-2) rank i copies block ``i-t`` to rank i+1 (n-1 steps).

    Raises:
        PatternError: if ``n`` is not an integer >= 1.
    """
    n = check_int_option("n", n)
    check_flow_count(f"ring-allgather on {n} ranks", n * (n - 1))
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
    check_flow_count(f"ring-reducescatter on {n} ranks", n * (n - 1))
    return _ring_pattern("reducescatter", n, [ring_phase(n, 0, 1, 0)], "ring-reducescatter")

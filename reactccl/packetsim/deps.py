"""When each flow of a pattern may start, as a parent list the C++ driver turns into child lists.

Two start rules, chosen by name so the executor can follow the flow-level simulator's:

* ``data`` -- a flow starts at the instant its last data dependency
  (:meth:`CollectivePattern.dependencies`: earlier flows into its source carrying its chunks) is
  delivered; the reference scenarios' rule ("a flow starts at the instant its last dependency is
  done").
* ``step-order`` -- as ``data``, and a rank's sends within one chunk graph also go in step order:
  a send waits until the same rank's sends of the previous step (with sends) in that chunk graph
  have been delivered (transitively, all its earlier steps).
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern

__all__ = ["START_RULES", "start_parents", "child_lists"]

START_RULES = ("data", "step-order")


def _step_order(pattern: CollectivePattern) -> tuple[np.ndarray, np.ndarray]:
    """(owner, parent) pairs: each flow waits on its sender's flows of the previous step with sends
    in the same chunk graph."""
    graph = pattern.flow_graph
    key = pattern.src.astype(np.int64) * (int(graph.max()) + 1 if len(graph) else 1) + graph
    order = np.lexsort((pattern.step, key))
    owners, parents = [], []
    k, s = key[order], pattern.step[order]
    i, F = 0, len(order)
    while i < F:  # one (sender, chunk graph) group at a time, in step order
        j = i
        while j < F and k[j] == k[i]:
            j += 1
        prev: list[int] = []
        a = i
        while a < j:
            b = a
            while b < j and s[b] == s[a]:
                b += 1
            cur = order[a:b].tolist()
            for f in cur:
                owners += [f] * len(prev)
                parents += prev
            prev, a = cur, b
        i = j
    return np.asarray(owners, dtype=np.int64), np.asarray(parents, dtype=np.int64)


def start_parents(pattern: CollectivePattern, rule: str = "data") -> tuple[np.ndarray, np.ndarray]:
    """Per flow, the flows whose delivery it waits for, as CSR ``(ptr (F+1,), parent (E,))``.

    Raises:
        ValueError: unknown ``rule`` (known: :data:`START_RULES`).
    """
    if rule not in START_RULES:
        raise ValueError(f"start rule {rule!r}: unknown; known: {', '.join(START_RULES)}")
    F = pattern.num_flows
    ptr, dep = pattern.dependencies()
    if rule == "data" or F == 0:
        return ptr, dep
    owner = np.repeat(np.arange(F), np.diff(ptr))
    o2, p2 = _step_order(pattern)
    pair = np.unique(np.concatenate([owner * F + dep, o2 * F + p2]))
    owner, dep = pair // F, pair % F
    out = np.zeros(F + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=F), out=out[1:])
    return out, dep


def child_lists(ptr: np.ndarray, parent: np.ndarray, num_flows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From parent CSR to what the driver needs: ``waiting (F,)`` (parents per flow) and the child
    CSR ``(child_ptr (F+1,), child (E,))`` (flows each flow's delivery feeds)."""
    owner = np.repeat(np.arange(num_flows), np.diff(ptr))
    waiting = np.diff(ptr).astype(np.int64)
    order = np.argsort(parent, kind="stable")
    child_ptr = np.zeros(num_flows + 1, dtype=np.int64)
    np.cumsum(np.bincount(parent, minlength=num_flows), out=child_ptr[1:])
    return waiting, child_ptr, owner[order]

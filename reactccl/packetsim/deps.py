"""When each flow of a pattern may start, as a parent list the C++ driver turns into child lists.

Two start rules, chosen by name so the executor can follow the flow-level simulator's:

* ``data`` -- a flow starts at the instant its last data dependency
  (:meth:`CollectivePattern.dependencies`: earlier flows into its source carrying its chunks) is
  delivered; the reference scenarios' rule ("a flow starts at the instant its last dependency is
  done").
* ``step`` -- as ``data``, and a rank's sends within one chunk graph also go in step order
  (netsim's default, :mod:`reactccl.pattern.order`): a send waits for the same rank's sends of the
  previous step (with sends) in that chunk graph. Where netsim waits for those sends to have *left*
  (last byte out), the packet engine waits for them to be *delivered* (all bytes at the receiving
  application): a TCP sender has no "last byte out" instant that the driver sees without a
  per-packet callback. The difference is one path latency per sending step plus the tail of the
  last window.
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern
from ..pattern.order import send_groups

__all__ = ["START_RULES", "start_parents", "child_lists"]

START_RULES = ("data", "step")


def _step_order(pattern: CollectivePattern) -> tuple[np.ndarray, np.ndarray]:
    """(owner, parent) pairs: each flow waits on its sender's flows of the previous step with sends
    in the same chunk graph (the groups of :func:`reactccl.pattern.order.send_groups`)."""
    sg = send_groups(pattern)
    prev = sg.prev[sg.group]                      # previous group of each flow's (src, graph); -1: none
    flows = np.nonzero(prev >= 0)[0]
    counts = sg.size[prev[flows]]
    owners = np.repeat(flows, counts)
    offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    parents = sg.members[np.repeat(sg.ptr[prev[flows]], counts) + offsets]
    return owners.astype(np.int64), parents.astype(np.int64)


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

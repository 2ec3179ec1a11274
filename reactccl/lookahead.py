"""Telling an executor the patterns of the epochs ahead, where they can no longer change.

An executor that runs epochs ahead of the one asked for (``packetsim.ReplicaCluster``: W copies of
a network, W - 1 epochs ahead) has to guess their patterns. REACT's controller makes each decision
take effect ``apply_delay`` = L epochs after the next one (§6.3), so once it has seen epochs
``0 .. e - 1`` the patterns of epochs ``e .. e + L`` are settled
(``ReactController.settled_through``). A driver calls :func:`tell_ahead` before each epoch; the
executor then runs the settled patterns ahead instead of guessing that nothing changes. Where it
runs at most L epochs ahead, it never runs an epoch it must throw away at a decision (with
``apply_delay = 0`` nothing ahead is settled and it guesses, as without this).

The protocol is optional on both sides: an executor with ``lookahead`` (int, epochs it runs ahead)
and ``expect(epoch, pattern)``; a driver that knows the last settled epoch.

Source: ours (REACT §6.3 gives the delay).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .pattern import CollectivePattern

__all__ = ["tell_ahead"]


def tell_ahead(executor: Any, pattern_of: Callable[[int], CollectivePattern], epoch: int, settled: int,
               epochs: int) -> int:
    """Before running ``epoch``: tell ``executor`` (if it has ``expect``) the patterns of epochs
    ``epoch + 1 .. epoch + executor.lookahead`` that are at most ``settled`` and before ``epochs``
    (the run's length). ``pattern_of(e)`` gives epoch ``e``'s pattern. Returns how many it told."""
    expect = getattr(executor, "expect", None)
    ahead = int(getattr(executor, "lookahead", 0) or 0)
    told = 0
    if expect is None:
        return told
    for f in range(epoch + 1, min(epoch + ahead, settled, epochs - 1) + 1):
        expect(f, pattern_of(f))
        told += 1
    return told

"""Argument checks for programs that every rank runs (examples, the testbed worker).

They run before ``init_process_group``: a bad argument then stops every rank at once
with one argparse line (exit 2), instead of each rank printing a traceback or waiting
for peers that already died.
"""

from __future__ import annotations

from ..algorithms import REGISTRY, names
from ..suggest import did_you_mean

__all__ = ["allreduce_algorithm_error"]


def allreduce_algorithm_error(name: str, flag: str = "--algorithm") -> str | None:
    """Why ``name`` is not a registered AllReduce generator (naming ``flag``), or None."""
    if name not in REGISTRY:
        return f"{flag} {name!r}: unknown{did_you_mean(name, REGISTRY)}; known: {', '.join(names())}"
    if REGISTRY[name].collective != "allreduce":
        return f"{flag} {name}: computes {REGISTRY[name].collective}, but this program needs an allreduce"
    return None

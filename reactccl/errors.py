"""The root of every exception reactccl defines: ``except ReactcclError`` catches them all.

Each error class keeps the built-in base it had (:class:`~reactccl.pattern.PatternError` is still a
``ValueError``, :class:`~reactccl.netsim.SimulationError` a ``RuntimeError``,
:class:`~reactccl.packetsim.PacketSimUnavailable` an ``ImportError``), so callers that catch those
go on working; ``tests/test_errors.py`` walks the package and checks every class derives from
:class:`ReactcclError`. This module imports nothing, so any layer may use it.

Source: ours (the habit of one package root error, as ``requests.RequestException``).
"""

from __future__ import annotations

__all__ = ["ReactcclError"]


class ReactcclError(Exception):
    """Base class of every exception raised by reactccl itself (bad input is also a ``ValueError``,
    a failed run a ``RuntimeError``: see each subclass)."""

"""Loading ns-3 (the ``ns3`` wheel's cppyy bindings) and our C++ flow driver, once per process.

ns-3 is an optional dependency (``pip install 'reactccl[ns3]'``). Importing it takes 10-25 s (cppyy
parses the module headers) and the driver in ``native/react_net.h`` is JIT-compiled on top in about a
second; both happen on the first :func:`load`, never at ``import reactccl``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ..errors import ReactcclError

__all__ = ["PacketSimUnavailable", "PacketSimError", "load", "available", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'reactccl[ns3]'"
_HEADER = Path(__file__).with_name("native") / "react_net.h"
_loaded: tuple[Any, Any] | None = None


class PacketSimUnavailable(ReactcclError, ImportError):
    """ns-3's Python bindings are missing or failed to load; the message names the extra to install."""


class PacketSimError(ReactcclError, RuntimeError):
    """A packet-level run cannot finish: a flow not delivered within the simulated-time limit, a
    connection that never opened, a packet with no route; the message names the flow or connection."""


def available() -> bool:
    """Whether the ``ns3`` wheel is installed (cheap: does not import it)."""
    return importlib.util.find_spec("ns3") is not None


def load() -> tuple[Any, Any]:
    """``(ns, reactpkt)``: the ns-3 namespace of the bindings and our compiled C++ namespace.

    Raises:
        PacketSimUnavailable: the ``ns3`` package is not installed or its bindings fail to load
            (the message says ``pip install 'reactccl[ns3]'``).
    """
    global _loaded
    if _loaded is not None:
        return _loaded
    if not available():
        raise PacketSimUnavailable(f"the packet-level engine needs ns-3's Python bindings: {INSTALL_HINT} "
                                   "(the ns3 wheel, ns-3 3.44; one dependency compiles with g++, ~3 min)")
    try:
        from ns3.ns import ns  # the 'ns' stub calls exit() when this fails; import the real module
        import cppyy
    except (ImportError, OSError, SystemExit, RuntimeError) as exc:
        raise PacketSimUnavailable(f"ns-3's Python bindings failed to load ({exc}); reinstall with "
                                   f"{INSTALL_HINT}") from None
    try:
        cppyy.cppdef(_HEADER.read_text())
    except Exception as exc:  # cling reports compile errors as SyntaxError / RuntimeError
        raise PacketSimUnavailable(f"compiling {_HEADER.name} against these ns-3 headers failed: {exc}") from None
    _loaded = (ns, cppyy.gbl.reactpkt)
    return _loaded

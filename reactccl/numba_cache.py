"""Whether a numba disk cache may be used for a kernel that has other files' kernels compiled in.

numba keys a cache entry on the decorated function's own source file. A kernel that calls
kernels of other files (``netsim/core.py``, ``tuner/candidates.py``) would then keep running
a callee's old code after an edit of the callee's file. Such a module pins the callee files'
hashes and caches only while every pin holds; a test per module checks its pins, so an edit
of a callee comes with a new pin. Source: ours.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

__all__ = ["file_pin", "pins_hold"]


def file_pin(path: str | Path) -> str:
    """The first 16 hex digits of the SHA-256 of the file at ``path``.

    Raises:
        OSError: the file cannot be read.
    """
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def pins_hold(root: str | Path, pins: Mapping[str, str]) -> bool:
    """True when every file ``root / name`` of ``pins`` hashes to its pin (:func:`file_pin`);
    False when one differs or cannot be read (no source to read: no disk cache either)."""
    try:
        return all(file_pin(Path(root) / name) == pin for name, pin in pins.items())
    except OSError:
        return False

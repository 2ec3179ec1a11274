"""File names of experiment results that say which settings made them, so no run replaces another's.

``experiment fig5a`` writes ``results/fig5a.json``; ``experiment fig5a --quick --epochs 20`` used to
write the same file, and a one-side ``sp goodput sp-square --sides 8`` replaced the picture of the
whole figure without a word. :func:`result_stem` keeps the bare name for a run with the defaults
and appends the settings that differ (``fig5a-epochs20-quick``, ``sp-square-sides8``); a run with
the same settings replaces its own files, and :func:`existing` lets the caller say so. Source: ours.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["result_stem", "existing", "MAX_STEM"]

#: Longest stem spelled out; a longer one ends in a digest of the settings instead.
MAX_STEM = 100

_UNSAFE = re.compile(r"[^A-Za-z0-9._,=+x-]+")


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return ""
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, tuple):
        return "x".join(_value(x) for x in v)
    if isinstance(v, (list, set)):
        return ",".join(_value(x) for x in v)
    if isinstance(v, Mapping):
        return ",".join(f"{k}={_value(x)}" for k, x in sorted(v.items()))
    return str(v)


def result_stem(name: str, settings: Mapping[str, Any],
                formats: Mapping[str, Callable[[Any], str]] | None = None) -> str:
    """``name`` followed by ``-`` and each setting (sorted by key) that is not None, False or empty:
    ``key`` alone for True, else ``key`` and its value (lists joined by ``,``, tuples by ``x``,
    mappings as ``k=v``; ``formats[key]`` formats one value of a key, e.g. sizes as ``64KiB``).
    Characters unsafe in a file name become ``_``; past :data:`MAX_STEM` characters the settings
    are replaced by a 10-digit digest of them.

    Example: ``result_stem("sp-square", {"sides": [8], "quick": False})`` -> ``"sp-square-sides8"``.
    """
    formats = formats or {}
    parts = []
    for key in sorted(settings):
        v = settings[key]
        if v is None or v is False or (hasattr(v, "__len__") and not isinstance(v, str) and len(v) == 0):
            continue
        fmt = formats.get(key)
        if fmt is not None:
            text = ",".join(fmt(x) for x in v) if isinstance(v, (list, tuple)) else fmt(v)
        else:
            text = _value(v)
        parts.append(_UNSAFE.sub("_", f"{key}{text}"))
    if not parts:
        return name
    stem = f"{name}-{'-'.join(parts)}"
    if len(stem) <= MAX_STEM:
        return stem
    digest = hashlib.sha256(json.dumps({k: _value(v) for k, v in settings.items()}, sort_keys=True).encode())
    return f"{name}-custom-{digest.hexdigest()[:10]}"


def existing(paths: Iterable[str | Path]) -> list[str]:
    """Those of ``paths`` that exist now (files a run is about to replace), as text."""
    return [str(p) for p in paths if Path(p).exists()]

"""'Did you mean' for names people type: algorithms, topologies, experiments, collectives, commands.

:func:`close_names` compares names with case, ``_``, ``-`` and spaces ignored (``NCCL_tree``,
``nccl-tree`` and ``ncclTree`` match ``nccl-tree``), then by :func:`difflib.get_close_matches`
(``nccl-trees`` -> ``nccl-tree``), then by whole parts (``tree`` -> ``nccl-tree``, a part of the
name between dashes). :func:`did_you_mean` words the result for an error message. Imports
nothing but the standard library, so any layer may use it. Source: ours; git's "did you mean"
for mistyped commands and Python 3.12's NameError hints do the same.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

__all__ = ["close_names", "did_you_mean"]

_FOLD = re.compile(r"[\s_\-]+")


def _fold(name: str) -> str:
    return _FOLD.sub("", str(name).lower())


def _parts(name: str) -> list[str]:
    return [p for p in _FOLD.split(str(name).lower()) if p]


def close_names(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` names of ``choices`` that ``word`` may have meant, best first: equal when case,
    ``_``, ``-`` and spaces are ignored; then close in spelling (:func:`difflib.get_close_matches`,
    cutoff 0.6, on the folded forms); then names with ``word`` as one of their dash-separated
    parts. Empty when nothing is close. Example: ``close_names("tree", ["ring", "nccl-tree"])``
    -> ``["nccl-tree"]``."""
    names = list(dict.fromkeys(str(c) for c in choices))
    folded: dict[str, list[str]] = {}
    for c in names:
        folded.setdefault(_fold(c), []).append(c)
    w = _fold(word)
    out: list[str] = list(folded.get(w, []))
    for f in difflib.get_close_matches(w, list(folded), n=n, cutoff=0.6):
        out += folded[f]
    wparts = _parts(word)
    if wparts:
        out += [c for c in names if all(p in _parts(c) for p in wparts)]
    return list(dict.fromkeys(out))[:n]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'nccl-tree'?)"`` (or ``"... 'a' or 'b'?)"``) for :func:`close_names` of
    ``word``, to append to the name in an error message; ``""`` when nothing is close."""
    found = close_names(word, choices)
    if not found:
        return ""
    quoted = [repr(f) for f in found]
    return " (did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?)"

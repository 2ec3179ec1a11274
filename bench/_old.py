"""The ``reactccl`` package of an earlier git revision, importable beside today's, so a bench
can time old and new code side by side in one run (``--before REV``)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tarfile


def export_old(rev: str, into: str) -> str:
    """Write the ``reactccl`` package as it was at git revision ``rev`` under ``into`` as the
    package ``reactccl_old`` (its imports are relative, so it runs as a whole, beside today's);
    returns ``into``.

    Raises:
        RuntimeError: git cannot export ``rev``.
    """
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tar = os.path.join(into, "old.tar")
    got = subprocess.run(["git", "archive", "-o", tar, rev, "reactccl"], capture_output=True, text=True, cwd=repo,
                         timeout=60)
    if got.returncode:
        raise RuntimeError(got.stderr.strip())
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    os.rename(os.path.join(into, "reactccl"), os.path.join(into, "reactccl_old"))
    return into


def load_old(path: str, *names: str) -> list:
    """The objects ``names`` (``"module.attribute"`` inside the package, e.g.
    ``"runtime.RCollective"``) of the package :func:`export_old` wrote under ``path``."""
    if path not in sys.path:
        sys.path.insert(0, path)
    out = []
    for name in names:
        mod, attr = name.rsplit(".", 1)
        out.append(getattr(importlib.import_module(f"reactccl_old.{mod}"), attr))
    return out

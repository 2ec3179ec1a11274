"""Say on stderr when a command starts compiling numba kernels, and about how long it takes.

numba compiles a kernel at its first call and caches it on disk beside its source
(``__pycache__``), so only the first run on a machine (or after an edit of the kernel's file) pays;
before this notice that run sat silent, its progress bar at 0%, for a minute. :func:`install`
registers a listener for numba's ``numba:compile`` event, which numba fires only on a real compile
(a cache miss, not a cache load), and prints one line per family of kernels the first time one of
the family's kernels is compiled at top level (families under :data:`QUIET_BELOW` seconds say
nothing), e.g.::

    reactccl: compiling REACT's kernels (numba), once per install: about 29 s of CPU

The estimates are the CPU seconds of a cold compile of every kernel of the family, measured on
the project's 2-core machines (``bench/bench_startup.py`` prints them); a family part of whose
kernels are cached takes less. Source: ours; numba's event API is documented in its "Notes on
numba's event API" (``numba.core.event``).
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["FAMILIES", "QUIET_BELOW", "install", "family_of"]

#: (module prefix, what to call the family, cold compile estimate in CPU seconds), first match wins.
#: Measured by ``bench/bench_startup.py --cold`` on 2 cores at load 10 (the demo: REACT's 29.1 s with
#: the pattern kernels its scorer compiles in, the ECMP draw's 1.2 s; main's demo, which still
#: compiled the simulator: 29.4 s for it, 8.6 s for the pattern kernels on their own).
FAMILIES: tuple[tuple[str, str, float], ...] = (
    ("reactccl.netsim.", "the simulator's kernels", 30.0),
    ("reactccl.traffic.", "the ECMP port draw", 1.0),
    ("reactccl.tuner.", "REACT's kernels", 29.0),
    ("reactccl.pattern.", "the pattern kernels", 9.0),
)

#: Families estimated under this many CPU seconds compile without a word.
QUIET_BELOW = 2.0


def family_of(module: str) -> tuple[str, float] | None:
    """``(name, estimate s)`` of the family of a kernel defined in ``module``, or None (not ours)."""
    for prefix, name, seconds in FAMILIES:
        if module.startswith(prefix):
            return name, seconds
    return None


_installed: list[object] = []


def install(stream: TextIO | None = None) -> bool:
    """Register the notice (once per process; later calls do nothing). Only where numba is loaded
    already: registering imports it, and a command that compiles nothing must not pay that.
    ``stream``: where to print (default ``sys.stderr`` at print time).

    Returns:
        Whether the listener is registered (now or before).
    """
    if _installed:
        return True
    if "numba" not in sys.modules:
        return False
    from numba.core import event  # start-up cost: loaded already (checked above)

    class _Notice(event.Listener):
        """Prints a family's line at its first top-level compile; nested compiles (a kernel's
        callees) belong to the kernel that started them."""

        def __init__(self) -> None:
            self.depth = 0
            self.said: set[str] = set()

        def on_start(self, ev) -> None:
            self.depth += 1
            if self.depth != 1:
                return
            disp = ev.data.get("dispatcher")
            fam = family_of(getattr(getattr(disp, "py_func", None), "__module__", "") or "")
            if fam is None or fam[0] in self.said or fam[1] < QUIET_BELOW:
                return
            self.said.add(fam[0])
            out = stream if stream is not None else sys.stderr
            print(f"reactccl: compiling {fam[0]} (numba), once per install: about {fam[1]:.0f} s of CPU",
                  file=out, flush=True)

        def on_end(self, ev) -> None:
            self.depth -= 1

    listener = _Notice()
    event.register("numba:compile", listener)
    _installed.append(listener)
    return True

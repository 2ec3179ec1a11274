"""Upper bounds of the CLI's counts, checked while the command line is parsed (before any work).

A count on the command line sizes an allocation or a loop: ``--epochs 1000000000`` asked
for a 7.45 GiB array after the run had started, ``--scenarios 1000000000`` generated
scenarios for minutes, ``--ecmp-ports 1000000000`` a 834 GiB table. Every such flag gets
its bound here, one place for all commands:

* :func:`bound_counts` turns options a parser already has into bounded ones: their values
  must be ASCII-digit integers up to the bound, and their ``--help`` says the bound
  (``"... [at most 100000]"``). A command adds its options as before and calls it once; the
  lower ends (>= 1, >= 0) stay where the commands check them, with their own words.
* :func:`jobs_count` is the type of ``--jobs``: at least 1, and more than the CPUs this
  process may use is cut to them, with a note on stderr (more worker processes than cores
  only share the cores and multiply the memory).

Bounds (module constants, so tests and docs name them): epochs :data:`MAX_EPOCHS`,
scenarios :data:`MAX_SCENARIOS`, repetitions (``perf -n/-w``) :data:`MAX_ITERS`, ECMP ports
:data:`MAX_ECMP_PORTS`; topology specs are bounded by the library
(:data:`reactccl.topology.graph.MAX_LINKS`), SP fabrics by
:data:`reactccl.experiments.sp_goodput.MAX_FABRIC_NODES`, ranks by the generators' memory
estimate (:mod:`reactccl.algorithms.sizes`).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable

from ..pattern.types import excerpt

__all__ = ["bounded_int", "bound_counts", "jobs_count", "MAX_EPOCHS", "MAX_SCENARIOS",
           "MAX_ITERS", "MAX_ECMP_PORTS", "MAX_LIST", "MAX_REPLICAS",
           "MAX_EXTERNAL_FLOWS"]

#: Epochs of one run (simulate, demo, experiment, testbed): the paper runs 100.
MAX_EPOCHS = 100_000
#: Scenarios per setting of an experiment (the paper: 10; fig6/fig7: 5).
MAX_SCENARIOS = 10_000
#: Timed or warm-up iterations per size (``perf -n/-w``; nccl-tests' default is 20 and 5).
MAX_ITERS = 100_000
#: ECMP ports per flow (the simulator keeps a route per flow and port).
MAX_ECMP_PORTS = 1024
#: External flows into one rank (``demo --p``, ``testbed congest --flows``): REACT's experiments use up to 8;
#: 100,000 ran for ten minutes in the demo.
MAX_EXTERNAL_FLOWS = 64
#: Rows of a listing (``--slowest``).
MAX_LIST = 100_000
#: Copies of the network of a packet-level run, one process each (``simulate --replicas``).
MAX_REPLICAS = 256

_INT = re.compile(r"-?[0-9]+")


def bounded_int(hi: int, lo: int | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an integer of ASCII digits (optional ``-``) of at most ``hi``
    (and at least ``lo`` when given; without it the command checks the lower end itself, with
    its own words, e.g. "--slowest: expected a non-negative integer").

    The returned function raises :class:`argparse.ArgumentTypeError` (argparse then names the
    flag and exits with 2) for anything else, e.g. ``1e9``, ``+3``, ``٢`` or ``1000000000``
    above ``hi``, echoing at most an excerpt of the value.
    """
    def parse(text: str) -> int:
        t = text.strip()
        if not _INT.fullmatch(t) or len(t) > 20:
            raise argparse.ArgumentTypeError(f"expected an integer of at most {hi}, got {excerpt(text)}")
        v = int(t)
        if v > hi:
            raise argparse.ArgumentTypeError(f"{v} is above the limit of {hi}")
        if lo is not None and v < lo:
            raise argparse.ArgumentTypeError(f"{v} is below {lo}")
        return v

    parse.__name__ = f"integer of at most {hi}"     # argparse's fallback wording uses the type's name
    return parse


def bound_counts(parser: argparse.ArgumentParser, bounds: dict[str, int]) -> None:
    """Make each option of ``parser`` named in ``bounds`` (``{"--epochs": MAX_EPOCHS}``) a
    :func:`bounded_int` of at most that many, and say so in its help (``[at most 100000]``).
    A hidden deprecated alias of the option (:func:`reactccl.cli._common.deprecated_alias`)
    gets the same type.

    Raises:
        ValueError: a flag that is not an option of ``parser`` (a programming error).
    """
    for flag, hi in bounds.items():
        found = parser._option_string_actions.get(flag)  # argparse has no public lookup
        if found is None:
            raise ValueError(f"bound_counts: {flag!r} is not an option of {parser.prog!r}")
        action: argparse.Action = found
        action.type = bounded_int(hi)
        for other in parser._actions:
            if getattr(other, "target", None) is action:
                other.type = action.type
        if action.help and action.help is not argparse.SUPPRESS:
            action.help = f"{action.help} [at most {hi}]"


def jobs_count(text: str) -> int:
    """The argparse ``type`` of ``--jobs``: an integer; above the CPUs this process may use
    (:func:`reactccl.experiments.sweep.default_jobs`) it is cut to them, with a one-line note on
    stderr (below 1 is left to the command, which refuses it)."""
    from ..experiments.sweep import default_jobs
    n = bounded_int((1 << 31) - 1)(text)
    cpus = default_jobs()
    if n > cpus:
        print(f"reactccl: --jobs {n} is more than the {cpus} CPUs this process may use; using {cpus}",
              file=sys.stderr)
        return cpus
    return n

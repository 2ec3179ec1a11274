"""The table of ``reactccl``'s subcommands: name, the module that builds it, one line of help.

:mod:`reactccl.cli.main` lists every command from this table without importing the command
modules (each pulls in numpy, numba or matplotlib: about 1 s of start-up), and imports only the
module of the command that runs, or whose ``--help`` is asked. Each module's ``add_parser`` takes
its one-line help from :data:`HELP`, so ``reactccl --help`` and the full parser say the same.
Imports nothing heavy (the point of the module). Source: ours; git and pip register their
commands the same way (a name table, the implementation loaded on use).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Command", "COMMANDS", "HELP", "command_named"]


class Command(NamedTuple):
    """One subcommand: ``name`` as typed, ``module`` (dotted path, with ``add_parser(subparsers)``)
    and ``help`` (one line for ``reactccl --help``)."""

    name: str
    module: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("pattern", "reactccl.cli.pattern_cmd", "generate, verify and show collective patterns"),
    Command("testbed", "reactccl.cli.testbed_cmd", "emulated cluster on one machine (network namespaces; root)"),
    Command("simulate", "reactccl.cli.simulate_cmd", "simulate epochs of a collective on a (congested) network"),
    Command("sp", "reactccl.cli.sp_cmd", "SP-allreduce: deficiency metrics and goodput experiments"),
    Command("experiment", "reactccl.cli.experiment_cmd",
            "reproduce a REACT or SP-allreduce simulation figure (names: 'experiment list')"),
    Command("demo", "reactccl.cli.demo_cmd", "REACT on a congested simulated cluster, against the same run without it"),
    Command("perf", "reactccl.cli.perf_cmd",
            "nccl-tests-style sweep: time, algbw, busbw and #wrong, out of place and in place"),
)

#: One-line help of each command, by name.
HELP: dict[str, str] = {c.name: c.help for c in COMMANDS}


def command_named(argv: list[str]) -> str | None:
    """The subcommand word of ``argv`` (arguments after ``reactccl``): the first that does not start
    with ``-`` (the top-level parser has only ``-h/--help`` and ``--version``, which take no value),
    or None when there is none. Example: ``["--version"]`` -> None, ``["simulate", "-a", "ring"]``
    -> ``"simulate"``."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None

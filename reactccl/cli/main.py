"""``reactccl`` console script: dispatches to subcommand modules.

Each module in :data:`COMMANDS` exposes ``add_parser(subparsers)`` which adds its
subcommand(s) and sets ``func`` (a callable taking the parsed args and returning
an exit code). The parser is a :class:`~reactccl.cli._common.PlainParser`, so every
subcommand's help is free of docstring markup; ``reactccl --version`` prints the version.
Building the parser imports every subcommand module, so an import a command needs only
when it runs sits inside its function, marked ``# start-up cost``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys

from .. import __version__
from ._common import PlainParser
from .errors import USAGE_ERRORS, report

COMMANDS = [
    "reactccl.cli.pattern_cmd",
    "reactccl.cli.testbed_cmd",
    "reactccl.cli.simulate_cmd",
    "reactccl.cli.sp_cmd",
    "reactccl.cli.experiment_cmd",
    "reactccl.cli.demo_cmd",
    "reactccl.cli.perf_cmd",
]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (all subcommands)."""
    parser = PlainParser(
        prog="reactccl",
        description="Collective communication patterns: generate, verify, simulate, run and tune with REACT.")
    parser.add_argument("--version", action="version", version=f"reactccl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in COMMANDS:
        importlib.import_module(mod).add_parser(sub)
    return parser


def _raise_broken_pipe(console) -> None:
    """Replacement for rich's ``Console.on_broken_pipe``, which exits with ``SystemExit(1)``:
    drop the console's buffered output and raise BrokenPipeError, which :func:`main` turns into 141."""
    console.quiet = True
    raise BrokenPipeError(errno.EPIPE, "output pipe closed")


@contextlib.contextmanager
def _closed_pipe_raises():
    """While a command runs, every rich Console (the CLI's and the library's) lets a closed pipe
    reach :func:`main` as BrokenPipeError; restored afterwards, so library users keep rich's way."""
    from rich.console import Console
    saved = Console.on_broken_pipe
    Console.on_broken_pipe = _raise_broken_pipe
    try:
        yield
    finally:
        Console.on_broken_pipe = saved


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code (141, quietly, when a reader such as
    ``head`` closes the output early, like other Unix tools). Bad input that a command lets
    through (see :data:`reactccl.cli.errors.USAGE_ERRORS`) is one line on stderr and exit 2,
    never a traceback (``REACTCCL_TRACEBACK=1`` shows it)."""
    args = build_parser().parse_args(argv)
    try:
        with _closed_pipe_raises():
            code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe may only show at this last write
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # output piped into e.g. `head`, which closed early: stop quietly like other Unix tools.
        # Subcommands must let BrokenPipeError through (it is an OSError: an `except OSError`
        # that reports file errors has to re-raise it first).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except USAGE_ERRORS as exc:
        return report(exc, "error")


if __name__ == "__main__":
    sys.exit(main())

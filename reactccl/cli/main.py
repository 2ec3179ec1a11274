"""``reactccl`` console script: dispatches to subcommand modules.

Each module in :data:`reactccl.cli.commands.COMMANDS` exposes ``add_parser(subparsers)`` which
adds its subcommand and sets ``func`` (a callable taking the parsed args and returning an exit
code). The parser is a :class:`~reactccl.cli._common.PlainParser`, so every subcommand's help is
free of docstring markup; ``reactccl --version`` prints the version.

Start-up: :func:`main` imports only the module of the command named on the command line (the
others are listed from the table, with their one-line help), so ``reactccl --version`` and
``--help`` import neither numpy nor numba, and ``pattern verify`` imports no simulator. Inside a
command module, an import needed only by some of its actions sits inside their function, marked
``# start-up cost``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import sys

from .. import __version__
from ..suggest import did_you_mean
from ._common import PlainParser
from .commands import COMMANDS, HELP, command_named
from .compile_notice import install as install_compile_notice
from .errors import USAGE_ERRORS, report


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser. ``argv`` None: every subcommand's full parser (imports every command
    module). Else only the command ``argv`` names gets its full parser (its module imported); the
    others are placeholders with their one-line help, enough for ``reactccl --help``.

    Raises:
        SystemExit(2): ``argv`` names no known command (argparse's usage error, with the close
            names: ``simulat`` -> did you mean 'simulate'?).
    """
    parser = PlainParser(
        prog="reactccl",
        description="Collective communication patterns: generate, verify, simulate, run and tune with REACT.")
    parser.add_argument("--version", action="version", version=f"reactccl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wanted = None if argv is None else command_named(argv)
    if wanted is not None and wanted not in HELP:
        parser.error(f"unknown command {wanted!r}{did_you_mean(wanted, HELP)}; commands: {', '.join(HELP)}")
    for cmd in COMMANDS:
        if argv is None or cmd.name == wanted:
            importlib.import_module(cmd.module).add_parser(sub)
        else:
            sub.add_parser(cmd.name, help=cmd.help, add_help=False)
    return parser


def _raise_broken_pipe(console) -> None:
    """Replacement for rich's ``Console.on_broken_pipe``, which exits with ``SystemExit(1)``:
    drop the console's buffered output and raise BrokenPipeError, which :func:`main` turns into 141."""
    console.quiet = True
    raise BrokenPipeError(errno.EPIPE, "output pipe closed")


@contextlib.contextmanager
def _closed_pipe_raises():
    """While a command runs, every rich Console (the CLI's and the library's) lets a closed pipe
    reach :func:`main` as BrokenPipeError; restored afterwards, so library users keep rich's way.
    Only where rich is loaded already: the commands that print through rich import it at module level,
    before this runs, and one that does not (``pattern verify``) is spared its import."""
    if "rich.console" not in sys.modules:
        yield
        return
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
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    install_compile_notice()   # where the command's modules loaded numba: say when kernels compile
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

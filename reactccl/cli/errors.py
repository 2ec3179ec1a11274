"""One way for every subcommand to report bad input: one line on stderr, exit code 2.

:func:`report` prints ``PREFIX: message`` (the message's first line; the full text of a
multi-line error stays available with ``REACTCCL_TRACEBACK=1``); :func:`os_error_text`
words an :class:`OSError` with the path it concerns even when the OS gives none (a write
to ``/dev/full`` fails with ``ENOSPC`` and ``filename=None``). :data:`USAGE_ERRORS` are the
exception types that mean bad input (ValueError covers PatternError, UnitError,
TopologyError, BackgroundError...); ``reactccl.cli.main`` turns any of them that a command
lets through into the same one line, so no bad input ends in a traceback.

Exit codes follow argparse and nccl-tests' habit: 0 done, 1 a check failed (``pattern verify``
FAIL, ``testbed down`` with nothing to remove), 2 bad input, 130 interrupted, 141 closed pipe.
"""

from __future__ import annotations

import errno
import os
import sys
import traceback

__all__ = ["USAGE_ERRORS", "report", "report_fail", "os_error_text", "error_text", "progress", "EXIT_USAGE"]

EXIT_USAGE = 2
#: Longest error line printed: a value echoed from a hostile file or flag is cut (the places that
#: echo file values cut them to an excerpt already; this is the last guard).
MAX_LINE = 1000

#: Exceptions that mean "the input was wrong", not "reactccl has a bug".
USAGE_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, MemoryError, RecursionError)


def os_error_text(exc: OSError, path: str | os.PathLike | None = None) -> str:
    """``"PATH: reason"`` for an OSError: its own filename, else ``path``, else the reason
    alone (never ``"...: None"``)."""
    reason = exc.strerror or (errno.errorcode.get(exc.errno, "") if exc.errno else "") or str(exc)
    where = exc.filename if exc.filename is not None else path
    return f"{os.fspath(where)}: {reason}" if where is not None else reason


def error_text(exc: BaseException, path: str | os.PathLike | None = None) -> str:
    """The message for ``exc`` on one line of at most :data:`MAX_LINE` characters: OSError as
    :func:`os_error_text`, MemoryError and RecursionError said plainly, KeyError without repr
    quotes, anything else ``str(exc)``."""
    if isinstance(exc, OSError):
        text = os_error_text(exc, path)
    elif isinstance(exc, MemoryError):
        text = f"out of memory{': ' + str(exc) if str(exc) else ''} (use a smaller input)"
    elif isinstance(exc, RecursionError):
        text = "input nested too deeply"
    elif isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        text = exc.args[0]
    else:
        text = str(exc) or type(exc).__name__
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return _cut(lines[0].strip() if lines else type(exc).__name__)


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE else f"{line[:MAX_LINE - 40]}... ({len(line)} characters)"


def report(exc: BaseException | str, prefix: str = "error", path: str | os.PathLike | None = None) -> int:
    """Print ``PREFIX: message`` as one line on stderr; returns :data:`EXIT_USAGE` (2).

    A message that already starts with ``PREFIX:`` is not prefixed twice."""
    text = _cut(exc) if isinstance(exc, str) else error_text(exc, path)
    text = text if text.startswith(f"{prefix}:") else f"{prefix}: {text}"
    if os.environ.get("REACTCCL_TRACEBACK") and isinstance(exc, BaseException):
        traceback.print_exception(exc, file=sys.stderr)
    print(text, file=sys.stderr, flush=True)
    return EXIT_USAGE


def progress(*parts) -> None:
    """A progress line on stderr (stdout keeps the result, as in ``simulate`` and ``pattern``)."""
    print(*parts, file=sys.stderr, flush=True)


def report_fail(path: str, exc: Exception, stream=None) -> int:
    """Print ``FAIL PATH: why`` (on ``stream``, default stdout) for a pattern that does not compute
    its collective (``exc``, a VerificationError), JSON or MSCCL XML alike; returns 1, the exit code
    of a failed check."""
    print(f"FAIL {path}: {exc}", file=stream or sys.stdout)
    return 1

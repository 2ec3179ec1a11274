"""Small helpers every subcommand shares: help text without reStructuredText markup, and
hidden deprecated aliases of renamed options.

* :class:`PlainParser` is the parser class of ``reactccl`` and (argparse builds
  subparsers with the parent's class) of every subcommand: its help and usage drop the
  markup that docstrings carry (double backquotes, ``:func:`` and other roles), so text
  taken from a module docstring reads cleanly in a terminal.
* :func:`deprecated_alias` keeps an old option name working, hidden from ``--help``, with
  one warning on stderr naming the new one (``--opt`` -> ``--option``).
* :func:`check_outputs` refuses an output file that cannot be written before a run starts,
  not after it (a packet-level run takes tens of minutes); :func:`check_not_input` one that
  is an input of the command.
* :func:`save_pattern_line` writes ``--save-pattern`` and words what the file holds as
  ``pattern verify`` will read it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

__all__ = ["PlainParser", "plain", "deprecated_alias", "check_outputs", "check_not_input", "save_pattern_line"]

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(~?)([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    """``text`` without reStructuredText inline markup: ````x```` -> ``x``,
    ``:func:`a.b``` -> ``a.b``, ``:mod:`~a.b``` -> ``b`` (as Sphinx shows it),
    ``:class:`T <a.T>``` -> ``T``.
    Example: ``plain("see :func:`reactccl.algorithms.generate` and ``--opt``")`` ->
    ``"see reactccl.algorithms.generate and --opt"``."""
    def role(m: re.Match) -> str:
        return m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2)

    return _LITERAL.sub(r"\1", _ROLE.sub(role, text))


class PlainParser(argparse.ArgumentParser):
    """An ArgumentParser whose help and usage are passed through :func:`plain`, and which reads a
    word that starts with ``-`` and a digit (``-1MB``, ``-.5``) as a value, not as an option, as
    Python 3.13's argparse does: ``-s -1MB`` then reaches the size parser and is refused as negative
    instead of with "expected one argument". Subparsers inherit the class."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"-\.?\d")

    def format_help(self) -> str:
        return plain(super().format_help())

    def format_usage(self) -> str:
        return plain(super().format_usage())


class _Deprecated(argparse.Action):
    """Forwards to ``target`` (the action of the new name) after a warning on stderr."""

    def __init__(self, option_strings, dest, target: argparse.Action, new: str, **kwargs) -> None:
        super().__init__(option_strings, dest=target.dest, nargs=target.nargs, const=target.const,
                         default=argparse.SUPPRESS, type=target.type, choices=target.choices,
                         required=False, help=argparse.SUPPRESS, metavar=target.metavar)
        self.target, self.new = target, new

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"reactccl: {option_string} is deprecated, use {self.new}", file=sys.stderr)
        self.target(parser, namespace, values, self.new)


def deprecated_alias(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """Accept option ``old`` on ``parser`` as ``new`` (already added): same destination,
    nargs, type and choices; not shown in ``--help``; a one-line warning on stderr when used.

    Raises:
        ValueError: ``new`` is not an option of ``parser``.
    """
    target = parser._option_string_actions.get(new)  # argparse has no public lookup
    if target is None:
        raise ValueError(f"deprecated_alias: {new!r} is not an option of {parser.prog!r}")
    parser.add_argument(old, action=_Deprecated, target=target, new=new)


#: Output flags that write a matplotlib picture: their file's suffix names its format.
PICTURE_FLAGS = frozenset({"plot", "timeline"})


def _check_picture_format(flag: str, path: Path) -> None:
    """``path``'s suffix is a format matplotlib writes (``.png``, ``.jpg``, ``.pdf``, ``.svg``, ...).
    A name without one is refused: matplotlib would write ``NAME.png``, not the file named."""
    from matplotlib.figure import Figure
    formats = Figure().canvas.get_supported_filetypes()
    if not path.suffix:
        raise ValueError(f"{flag} {path}: no format suffix; name the file e.g. {path}.png")
    if path.suffix[1:].lower() not in formats:
        raise ValueError(f"{flag} {path}: format {path.suffix[1:]!r} cannot be written; use one of "
                         f"{', '.join(sorted(formats))}")


def check_outputs(**paths: str | None) -> None:
    """Each given output file (keyword: the flag's name with ``_`` for ``-``, value: the path or
    None) must be writable: its folder exists and is writable, and it is not a folder itself.
    A picture (:data:`PICTURE_FLAGS`) must also name a format matplotlib writes. Nothing is created.

    Raises:
        ValueError: naming the flag and the path, e.g. ``--save-pattern /nonexistent/x.json: no
            folder /nonexistent`` or ``--plot p.xyz: format 'xyz' cannot be written; ...``.
    """
    for name, path in paths.items():
        if not path:
            continue
        flag, p = "--" + name.replace("_", "-"), Path(path)
        if name in PICTURE_FLAGS:
            _check_picture_format(flag, p)
        folder = p.parent if str(p.parent) else Path(".")
        if p.is_dir():
            raise ValueError(f"{flag} {path}: is a folder, expected a file name")
        if not folder.is_dir():
            raise ValueError(f"{flag} {path}: no folder {folder}")
        if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
            raise ValueError(f"{flag} {path}: not writable")


def _same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file (:func:`os.path.samefile` when both exist, which
    sees hard links too; else the same resolved path, symbolic links followed)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_not_input(inputs: dict[str, str | None], **outputs: str | None) -> None:
    """Refuse an output file that is one of the command's input files: writing it would destroy
    the input (``pattern import x.xml -o x.xml``, ``simulate --pattern p.json --save-pattern
    p.json``). ``inputs``: ``{flag or argument name: path or None}``; ``outputs``: as for
    :func:`check_outputs` (the flag's name with ``_`` for ``-``).

    Raises:
        ValueError: naming the output flag, the input and the path, e.g. ``--output x.xml: is the
            input FILE x.xml; write to another file``.
    """
    for name, out in outputs.items():
        for what, inp in inputs.items():
            if out and inp and _same_file(out, inp):
                raise ValueError(f"--{name.replace('_', '-')} {out}: is the input {what} {inp}; write to another file")


def save_pattern_line(pattern, path: str) -> str:
    """Verify ``pattern``, write it to ``path`` (MSCCL XML for a ``.xml`` name, else JSON), read the
    file back (verified again) and return the line to print: the pattern as the file holds it, so
    it says what ``reactccl pattern verify FILE`` says. MSCCL XML keeps no step numbers: a file read
    back with fewer steps (steps without flows, or steps that need not wait on each other, merge:
    ``reactccl.pattern.steps``) says so, with the steps the run used.

    Raises:
        OSError: the file cannot be written or read; PatternError: the pattern does not verify.
    """
    from ..pattern import verify  # start-up cost
    from ..pattern.files import load_pattern, save_pattern
    verify(pattern)
    fmt = save_pattern(pattern, path)
    back = load_pattern(path)
    note = ""
    if back.num_steps != pattern.num_steps:
        note = (f"; MSCCL XML keeps no step numbers, so read back it has {back.num_steps} steps where the run's "
                f"pattern numbered {pattern.num_steps}, renumbered to the fewest consistent")
    return f"wrote {path} ({fmt}): {back!r} (verified{note})"

"""Tables that read as well piped as on a terminal.

On a terminal rich draws boxed tables fitted to the window. Piped or redirected, rich assumes 80
columns and wraps text inside cells (``1.507 GB/s (12.06`` / ``Gbps)`` on two lines), which neither a
person nor ``grep``/``awk`` can read. :func:`stdout_console` gives a console that, off a terminal, is
wide enough never to wrap, and :func:`print_table` then prints plain columns: no box, the title on
its own line, cells padded with spaces, one row per line. Source: ours; git and kubectl print
plain columns when piped the same way.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

__all__ = ["stdout_console", "print_table", "PLAIN_WIDTH"]

#: Width of a console off a terminal: wider than any row, so nothing wraps.
PLAIN_WIDTH = 1000


def stdout_console() -> Console:
    """A console on stdout: rich's own on a terminal, else :data:`PLAIN_WIDTH` columns wide
    (lines are never wrapped, no colour codes)."""
    console = Console(highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=True, width=PLAIN_WIDTH)
    return console


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` boxed on a terminal, as plain columns (no box, no padding at the edges)
    elsewhere."""
    if not console.is_terminal:
        table.box = None
        table.show_edge = False
        table.pad_edge = False
    console.print(table)

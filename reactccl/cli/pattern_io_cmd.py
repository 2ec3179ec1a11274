"""``reactccl pattern export|import``: patterns to and from MSCCL XML (and JSON)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..pattern import PatternError, VerificationError, dumps
from ..pattern.files import load_pattern
from ..pattern.io import read_bounded
from ..pattern.msccl_common import MscclError
from ..pattern.msccl_export import MAX_CHANNELS, executor_limits, to_msccl_xml
from ..pattern.msccl_import import from_msccl_xml
from ._common import check_not_input
from .errors import report_fail
from .options import parse_options


def _source(args):
    if Path(args.source).exists():
        return load_pattern(args.source)
    if args.ranks is None:
        raise PatternError(f"{args.source!r} is neither a pattern file nor used with --ranks N (an algorithm name)")
    from ..algorithms import generate  # start-up cost: the generators, for an algorithm name only
    return generate(args.source, args.ranks, **parse_options(args.option))


def _emit(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text)
    else:
        sys.stdout.write(text)


def _cmd_export(args) -> int:
    if Path(args.source).exists():
        check_not_input({"FILE": args.source}, output=args.output)
    p = _source(args)
    if args.to == "json":
        _emit(dumps(p), args.output)
        what = "reactccl.pattern/1 JSON"
    else:
        graphs = len(np.unique(p.chunk_graph))
        if args.max_channels < 1:
            raise MscclError(f"--max-channels: expected an integer >= 1, got {args.max_channels}")
        if graphs > args.max_channels:
            print(f"note: {graphs} chunk graphs on {args.max_channels} channels (graph g on channel "
                  f"g % {args.max_channels}); raise --max-channels to keep one channel per graph", file=sys.stderr)
        xml = to_msccl_xml(p, name=args.name, proto=args.proto, max_channels=args.max_channels)
        for w in executor_limits(xml):
            print(f"warning: {w}", file=sys.stderr)
        _emit(xml, args.output)
        what = "MSCCL XML"
    if args.output:
        print(f"wrote {args.output} ({what}): {p!r}", file=sys.stderr)
    return 0


def _cmd_import(args) -> int:
    check_not_input({"FILE.xml": args.file}, output=args.output)
    data = read_bounded(args.file)      # a regular file of at most MAX_FILE_BYTES
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PatternError(f"{args.file}: not valid UTF-8: byte 0x{e.object[e.start]:02x} at offset {e.start}") from None
    try:
        p = from_msccl_xml(text, name=args.name or Path(args.file).stem)
    except VerificationError as e:   # parses, but does not compute its collective: exit 1, as verify
        return report_fail(args.file, e, sys.stderr)
    _emit(dumps(p), args.output)
    print(f"OK {args.file}: {p.collective.value} on {p.num_ranks} ranks, {p.num_chunks} chunks, {p.num_flows} flows, "
          f"{p.num_steps} steps; no deadlock or race; every contribution arrives exactly once"
          + (f"; wrote {args.output}" if args.output else ""), file=sys.stderr)
    return 0


def add_io_parsers(ps: argparse._SubParsersAction, wrap) -> None:
    """Add ``export`` and ``import`` to the ``pattern`` subcommands (``wrap`` turns errors into exit 2)."""
    e = ps.add_parser("export", help="write a pattern (file, or algorithm with --ranks) as MSCCL XML or JSON",
                      description="Export a pattern for the MSCCL executor / msccl-tools: chunks on a grid of "
                                  "nchunksperloop cells, flows as send/receive steps (receive-then-forward fused "
                                  "into rcs/rrcs/rrs), one threadblock per (send peer, receive peer, channel), "
                                  "chunk graphs as channels, cross-threadblock waits as depid/deps.")
    e.add_argument("source", metavar="FILE|ALGO")
    e.add_argument("--to", choices=["msccl-xml", "json"], default="msccl-xml", help="format (default msccl-xml)")
    e.add_argument("--ranks", "-n", type=int, help="with an algorithm name: number of ranks")
    e.add_argument("--option", "-O", action="append", metavar="KEY=VALUE", help="generator option (repeatable)")
    e.add_argument("--name", help="<algo name> (default the pattern's name)")
    e.add_argument("--proto", default="Simple", choices=["Simple", "LL", "LL128"], help="MSCCL protocol (default Simple)")
    e.add_argument("--max-channels", type=int, default=MAX_CHANNELS,
                   help=f"channels available; graph g runs on channel g %% this (default {MAX_CHANNELS}, NCCL's MAXCHANNELS)")
    e.add_argument("-o", "--output", help="write to FILE instead of stdout")
    e.set_defaults(func=wrap(_cmd_export))
    i = ps.add_parser("import", help="read an MSCCL XML program as a verified reactccl.pattern/1 JSON",
                      description="Run the program symbolically (deadlocks, races and the final buffers checked), "
                                  "rebuild flows through scratch buffers and local copies, then verify the pattern.")
    i.add_argument("file", metavar="FILE.xml")
    i.add_argument("--name", help="pattern name (default the file's stem)")
    i.add_argument("-o", "--output", help="write the JSON to FILE instead of stdout")
    i.set_defaults(func=wrap(_cmd_import))

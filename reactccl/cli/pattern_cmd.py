"""``reactccl pattern generate|verify|show|list``: patterns as files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..pattern import PatternError, VerificationError, dumps, verify
from ..pattern.files import load_pattern
from .commands import HELP
from .errors import report, report_fail
from .options import SERVERS_EXAMPLE, parse_options
from .pattern_io_cmd import add_io_parsers


def _load_or_generate(args) -> object:
    target = args.target
    if Path(target).exists():
        given = [f for f, v in (("--ranks", args.ranks), ("--option", args.option)) if v]
        if given:
            raise PatternError(f"{' and '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to an algorithm name, not to the file {target!r} "
                               "(a file's pattern is shown as it is)")
        return load_pattern(target, check=False)   # JSON or MSCCL XML (XML is checked on import)
    from ..algorithms import generate, names  # start-up cost: the generators (and networkx), for this action only
    if args.ranks is None:
        raise PatternError(f"{target!r} is neither a file nor used with --ranks N "
                           f"(algorithms: {', '.join(names())})")
    return generate(target, args.ranks, **parse_options(args.option))


def _cmd_generate(args) -> int:
    from ..algorithms import generate  # start-up cost: the generators, for this action only
    p = generate(args.algorithm, args.ranks, **parse_options(args.option))
    text = dumps(p)
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}: {p!r} (verified)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _cmd_verify(args) -> int:
    # not a pattern (malformed JSON or XML), or too large: error (exit 2); a pattern (JSON, or MSCCL XML
    # checked as it is read) that does not compute its collective: FAIL (exit 1)
    try:
        r = verify(load_pattern(args.file, check=False))
    except VerificationError as e:
        return report_fail(args.file, e)
    print(f"OK {args.file}: {r.collective} on {r.num_ranks} ranks, {r.num_chunks} chunks, "
          f"{r.num_flows} flows, {r.num_steps} steps; every contribution arrives exactly once")
    return 0


def _cmd_show(args) -> int:
    p = _load_or_generate(args)
    if args.max_steps < 0:
        raise PatternError(f"--max-steps {args.max_steps}: must be 0 (every step) or more")
    print(p.show(max_steps=args.max_steps or None))
    return 0


def _option_text(opt: dict) -> str:
    """``slices: int = 1``, ``shape: shape or none = none``, ``n: int (required)``."""
    if opt["required"]:
        return f"{opt['name']}: {opt['type']} (required)"
    d = opt["default"]
    shown = "none" if d is None else "x".join(map(str, d)) if isinstance(d, list) else str(d).lower() \
        if isinstance(d, bool) else str(d)
    return f"{opt['name']}: {opt['type']} = {shown}"


def _cmd_list(args) -> int:
    from ..algorithms import REGISTRY, names  # start-up cost: the generators, for this action only
    from ..algorithms.registry import options as generator_options
    rows = [{"name": n, "collective": REGISTRY[n].collective, "summary": REGISTRY[n].summary,
             "options": generator_options(n)} for n in names()]
    if args.json:
        json.dump({"schema": "reactccl.generators/1", "generators": rows}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    for r in rows:
        print(f"{r['name']:24s} {r['collective']:14s} {r['summary']}")
        if r["options"]:
            print(f"{'':24s} {'':14s} options: " + "; ".join(_option_text(o) for o in r["options"]))
    print("\ngive options as --option KEY=VALUE (-O), e.g. -O slices=4 -O shape=8x4")
    print("multi-GPU servers: ring and nccl-tree build NCCL's hierarchy with -O gpus=G (-O nics=K, -O channels=C); "
          "simulate, perf and demo take servers, gpus and nics from a topology of servers, e.g. " + SERVERS_EXAMPLE)
    return 0


def _wrap(func):
    def run(args) -> int:
        try:
            return func(args)
        except PatternError as e:
            return report(e)
        except BrokenPipeError:  # a reader such as `head` closed the pipe: main() ends quietly
            raise
        except OSError as e:  # e.g. -o /dev/full: ENOSPC with no filename; name the file
            where = getattr(args, "output", None) or getattr(args, "file", None) or getattr(args, "target", None)
            return report(e, "error", path=where)
    return run


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add ``pattern`` and its subcommands."""
    p = sub.add_parser("pattern", help=HELP["pattern"])
    ps = p.add_subparsers(dest="pattern_command", metavar="ACTION")
    ps.required = True
    g = ps.add_parser("generate", help="generate a pattern (verified) as reactccl.pattern/1 JSON")
    g.add_argument("algorithm")
    g.add_argument("--ranks", "-n", type=int, required=True)
    g.add_argument("--option", "-O", action="append", metavar="KEY=VALUE",
                   help="generator option, e.g. slices=4 or root=0 (repeatable)")
    g.add_argument("-o", "--output", help="write to FILE instead of stdout")
    g.set_defaults(func=_wrap(_cmd_generate))
    v = ps.add_parser("verify", help="prove a pattern file computes its collective (exit 0) or say why not (exit 1)")
    v.add_argument("file")
    v.set_defaults(func=_wrap(_cmd_verify))
    s = ps.add_parser("show", help="print a pattern compactly (a file, or an algorithm with --ranks)")
    s.add_argument("target", metavar="FILE|ALGO")
    s.add_argument("--ranks", "-n", type=int, help="ranks, with an algorithm name (not with a file)")
    s.add_argument("--option", "-O", action="append", metavar="KEY=VALUE",
                   help="generator option, with an algorithm name (repeatable)")
    s.add_argument("--max-steps", type=int, default=40, help="list at most this many steps; 0: every step "
                   "(default 40)")
    s.set_defaults(func=_wrap(_cmd_show))
    lst = ps.add_parser("list", help="list the registered generators with their options, types and defaults")
    lst.add_argument("--json", action="store_true", help="print one JSON document (schema reactccl.generators/1)")
    lst.set_defaults(func=_wrap(_cmd_list))
    add_io_parsers(ps, _wrap)

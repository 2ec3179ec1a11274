"""``simulate`` options that read and write files: ``--pattern``, ``--save-pattern``, ``--plot``,
``--timeline``, ``--trace``. Kept apart from :mod:`reactccl.cli.simulate_cmd` so that module stays about running."""

from __future__ import annotations

import argparse
import sys

from ..pattern import PatternError
from ..pattern.files import load_pattern
from ._common import save_pattern_line


def add_file_options(p: argparse.ArgumentParser) -> None:
    """Add the file options to the ``simulate`` parser."""
    p.add_argument("--pattern", metavar="FILE",
                   help="simulate this pattern file (reactccl.pattern/1 JSON or MSCCL XML, verified) instead of "
                        "--algorithm/--ranks")
    p.add_argument("--save-pattern", metavar="FILE",
                   help="write the pattern the run ended on (with --react: REACT's last pattern), verified; "
                        "MSCCL XML for a .xml name, else JSON")
    p.add_argument("--plot", metavar="PNG", help="write a picture of the epoch times (REACT's changes marked)")
    p.add_argument("--timeline", metavar="PNG",
                   help="write a picture of the last epoch's flows as bars per rank (with --react: REACT's run)")
    p.add_argument("--trace", metavar="FILE.json",
                   help="write every epoch's flows as Chrome trace-event JSON for Perfetto (ui.perfetto.dev) or "
                        "chrome://tracing: a track per rank, a slice per flow (bytes, rate), REACT's decisions as "
                        "instants; with --react both runs")


def check_trace_size(flows: int, epochs: int, runs: int = 1) -> None:
    """Refuse ``--trace`` before a run whose file would pass :data:`reactccl.tracefile.MAX_EVENTS`
    (a flow per event, an epoch per event, per run).

    Raises:
        ValueError: naming the events and what to cut.
    """
    from ..tracefile import MAX_EVENTS  # start-up cost: small, but only --trace needs it
    events = (flows + 1) * epochs * runs
    if events > MAX_EVENTS:
        raise ValueError(f"--trace: {flows:,} flows x {epochs:,} epochs x {runs} run(s) = {events:,} trace events, "
                         f"more than {MAX_EVENTS:,}; give fewer --epochs (or ranks)")


def load_pattern_arg(args) -> None:
    """With ``--pattern``: load and verify it, and fill ``--algorithm``/``--ranks`` from it.

    Raises:
        ValueError: ``--pattern`` together with ``--algorithm``, or a ``--ranks`` that differs.
        PatternError, OSError: the file cannot be read or does not verify.
    """
    args.pattern_obj = None
    if not args.pattern:
        return
    if args.algorithm is not None or args.option:
        raise ValueError("--pattern: give a pattern file or --algorithm (with --option), not both")
    try:
        p = load_pattern(args.pattern)
    except OSError as e:
        raise ValueError(f"--pattern {args.pattern}: {e.strerror or e}") from None
    if args.ranks is not None and args.ranks != p.num_ranks:
        raise ValueError(f"--ranks {args.ranks}: the pattern in {args.pattern} has {p.num_ranks} ranks")
    args.pattern_obj, args.algorithm, args.ranks = p, p.name or args.pattern, p.num_ranks


def write_outputs(args, result=None, base=None, react=None) -> int:
    """Write the files asked for after a run; messages on stderr. Returns 2 if one could not be
    written, else 0."""
    runs = [("baseline", base), ("REACT", react)] if react is not None else [(args.algorithm, result)]
    last = react if react is not None else result
    try:
        if args.save_pattern:
            p = last.traces[-1].pattern if last.traces else last.controller.current_pattern
            print(save_pattern_line(p, args.save_pattern), file=sys.stderr)
        if args.plot or args.timeline:
            from ..experiments.run_plots import plot_epochs, plot_timeline  # start-up cost
            title = (f"{last.algorithm}, {last.num_ranks} ranks on {last.topology}, "
                     f"{last.message_bytes / 1e6:g} MB")
        if args.plot:
            changes = list(react.controller.decisions) if react is not None else []
            plot_epochs(args.plot, [(lab, r.durations) for lab, r in runs], changes, title=title,
                        warmup=args.warmup if react is not None else None)
            print(f"wrote {args.plot}", file=sys.stderr)
        if args.timeline:
            plot_timeline(args.timeline, last.traces[-1], title=title + (" (REACT)" if react is not None else ""))
            print(f"wrote {args.timeline}", file=sys.stderr)
        if getattr(args, "trace", None):
            from ..tracefile import TraceRun, write_chrome_trace  # start-up cost
            decided = list(react.controller.decisions) if react is not None else []
            tr_runs = [TraceRun(lab if react is not None else "", r.traces, decisions=decided if r is react else [])
                       for lab, r in runs]
            n = write_chrome_trace(args.trace, tr_runs, metadata={"command": "reactccl simulate",
                                                                  "topology": last.topology})
            print(f"wrote {args.trace}: {n:,} trace events (open in ui.perfetto.dev)", file=sys.stderr)
    except (OSError, PatternError, ValueError) as e:
        if isinstance(e, BrokenPipeError):
            raise
        print(f"error: {getattr(e, 'strerror', None) or e}", file=sys.stderr)
        return 2
    return 0

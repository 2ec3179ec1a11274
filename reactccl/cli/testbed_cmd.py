"""``reactccl testbed up|congest|run|down|status|experiment``: the emulated cluster on one machine.

A thin layer over :class:`reactccl.testbed.Testbed`; see that module for
the layout. Commands after ``up`` find the testbed through its state file
(``--prefix`` picks one when several are up). ``up`` and ``down`` first remove what
killed commands left behind (half-built testbeds, ranks of a killed ``run``; see
:func:`reactccl.testbed.testbed.sweep_stale`) and say so on stderr.

Exit codes: 0 done; 1 the testbed failed, or ``down`` found nothing to remove; 2 bad
arguments (or no root/iproute2); a ``run`` returns the job's code (124 on timeout).
"""

from __future__ import annotations

import argparse
import signal
import sys

from .bounds import MAX_EPOCHS, MAX_EXTERNAL_FLOWS, bound_counts
from .commands import HELP
from .experiment_cmd import _check_params, _param


def _tb():
    from .. import testbed  # start-up cost
    return testbed


def _cmd_up(args) -> int:
    tbm = _tb()
    tb = tbm.Testbed(hosts=args.hosts, rate=args.rate, prefix=args.prefix, queue=args.queue, cc=args.cc,
                     control=args.control)
    tb.up()
    _say_swept(tb.swept)
    s = tb.state
    print(f"testbed {s.prefix}: {s.hosts} hosts, {s.rate_bps / 1e6:g} Mbit/s each way per link, "
          f"queue {s.queue_bytes // 1024} KiB, TCP {s.cc}")
    for r in range(s.hosts):
        ctl = f", control {s.control_addr(r)} dev rclc" if s.control else ""
        print(f"  rank {r}: namespace {s.host_ns(r)}  {s.host_addr(r)} dev {tb.ifname}{ctl}")
    print(f"state: {s.path}; remove with `reactccl testbed down --prefix {s.prefix}`")
    return 0


def _say_swept(swept) -> None:
    for prefix, what in swept:
        ns = f"{len(what['namespaces'])} namespaces, " if what["namespaces"] else ""
        print(f"reactccl testbed: removed what a killed command left of testbed {prefix}: {ns}"
              f"{what['processes']} processes{', its state file' if what['state_file'] else ''}", file=sys.stderr)


def _cmd_down(args) -> int:
    from ..testbed.testbed import orphan_prefixes, sweep_stale  # start-up cost
    tbm = _tb()
    if args.prefix is not None:
        tbm.check_prefix(args.prefix)
    swept = sweep_stale()
    _say_swept(swept)
    if args.all:
        prefixes = tbm.known_prefixes() + orphan_prefixes()
        if not prefixes and not swept:
            print(f"reactccl testbed: no testbed to remove (no state file in {tbm.state_dir()}, no namespaces "
                  "named like a testbed's)", file=sys.stderr)
            return 1
    elif args.prefix is None:
        if not tbm.known_prefixes() and swept:
            return 0
        prefixes = [tbm.load_state(None).prefix]
    else:
        prefixes = [args.prefix]
    status = 0
    for prefix in prefixes:
        try:
            tb = tbm.Testbed.attach(prefix)
        except tbm.TestbedError:  # no state file: still remove namespaces with that prefix
            tb = tbm.Testbed(hosts=1, prefix=prefix)
        what = tb.down()
        if what["namespaces"] or what["state_file"] or what["processes"]:
            print(f"testbed {prefix}: removed {len(what['namespaces'])} namespaces, {what['processes']} processes"
                  f"{' and its state file' if what['state_file'] else ' (it had no state file)'}")
        elif not any(p == prefix for p, _ in swept):
            print(f"reactccl testbed: no testbed {prefix!r} to remove (no {tb.state.path}, no namespaces "
                  f"{prefix}-*)", file=sys.stderr)
            status = 1
    return status


def _cmd_congest(args) -> int:
    tbm = _tb()
    tb = tbm.Testbed.attach(args.prefix)
    if args.stop:
        n = tb.stop_congestion()
        print(f"testbed {tb.prefix}: stopped {n} congestion processes")
        return 0
    if args.into is None or args.flows is None:
        raise tbm.TestbedError("congest: give --into RANK and --flows P (or --stop)")
    g = tb.congest(args.into, args.flows, duration=args.duration)
    how_long = f"for {args.duration:g} s" if args.duration else "until `reactccl testbed congest --stop`"
    print(f"testbed {tb.prefix}: {g.flows} external TCP flows into rank {g.into} "
          f"({tb.host_addr(g.into)}:{g.port}) {how_long}")
    return 0


def _cmd_run(args) -> int:
    tbm = _tb()
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    tb = tbm.Testbed.attach(args.prefix)
    res = tb.run(cmd, timeout=args.timeout, master_port=args.master_port, ranks_per_host=args.ranks_per_host)
    if res.timed_out:
        print(f"testbed run: timed out after {args.timeout:g} s; all ranks stopped", file=sys.stderr)
    elif res.failed_rank is not None:
        print(f"testbed run: rank {res.failed_rank} exited {res.codes[res.failed_rank]}; "
              "other ranks stopped", file=sys.stderr)
    return res.returncode if res.returncode >= 0 else 128 - res.returncode  # killed by signal n: 128+n


def _cmd_status(args) -> int:
    tbm = _tb()
    prefixes = tbm.known_prefixes()
    orphans = tbm.orphan_prefixes()
    if not prefixes and not orphans:
        print("no testbed is up")
    for p in prefixes:
        s = tbm.load_state(p)
        flows = ", ".join(f"{g.flows} into rank {g.into}" for g in s.congestion) or "none"
        left = " [left by a killed command: the next up/down removes it]" if s.stale() else ""
        print(f"{p}: {s.hosts} hosts, {s.rate_bps / 1e6:g} Mbit/s, {s.externals} external senders, "
              f"congestion: {flows}{left}")
    for p in orphans:
        print(f"{p}: namespaces without a state file in {tbm.state_dir()} (`reactccl testbed down --prefix {p}` "
              "removes them)")
    return 0


def _cmd_experiment(args) -> int:
    from ..testbed import experiment as ex  # start-up cost

    params = dict(args.param)
    _check_params(params)
    cfg = ex.ExperimentConfig(hosts=tuple(args.hosts), flows=tuple(args.flows), rate=args.rate,
                              mbytes=args.mbytes, epochs=args.epochs, rounds=args.rounds, skip=args.skip,
                              algorithm=args.algorithm, modes=tuple(args.modes.split(",")),
                              victim=args.victim, control=not args.no_control, ranks_per_host=args.ranks_per_host,
                              react_options={"params": params} if params else {})
    results = ex.run_experiment(cfg, args.out)
    print(ex.format_table(ex.summarize(results)))
    ex.plot_cdf(results, f"{args.out}/cdf.png")
    print(f"wrote {args.out}/results.json and {args.out}/cdf.png; wall {results['wall_s']:.0f} s, "
          f"CPU {results['cpu_s']:.0f} s (all ranks and traffic processes)")
    return 0


def _on_sigterm(signum, frame):
    raise SystemExit(128 + signum)  # unwinds like Ctrl-C, so testbeds and ranks are cleaned up


def _wrap(func):
    def run(args) -> int:
        tbm = _tb()
        why = tbm.netns_unavailable()
        if why:
            print(f"reactccl testbed: {why}", file=sys.stderr)
            return 2
        signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            return func(args)
        except ValueError as e:  # bad arguments (TestbedConfigError is one)
            print(f"reactccl testbed: {e}", file=sys.stderr)
            return 2
        except tbm.TestbedError as e:
            print(f"reactccl testbed: {e}", file=sys.stderr)
            return 1
    return run


def add_parser(subparsers) -> None:
    """Add ``testbed`` and its subcommands."""
    p = subparsers.add_parser("testbed", help=HELP["testbed"],
                              description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="testbed_command", metavar="ACTION")
    sub.required = True

    def prefix_arg(sp):
        sp.add_argument("--prefix", default=None, help="run prefix (default: the only testbed up)")

    up = sub.add_parser("up", help="build a star of host namespaces behind a shaped bridge")
    up.add_argument("--hosts", type=int, default=4, help="number of hosts/ranks (default 4)")
    up.add_argument("--rate", default="200mbit", help="link rate, each direction (default 200mbit)")
    up.add_argument("--queue", default="256kb", help="bfifo limit per queue (default 256kb = 256 KiB)")
    up.add_argument("--cc", default="reno", choices=["reno", "bbr", "cubic"],
                    help="TCP congestion control inside the namespaces (default reno)")
    up.add_argument("--prefix", default=None, help="name prefix (default: \"rcl\" and five random characters)")
    up.add_argument("--control", action="store_true",
                    help="add an unshaped control network (rclc) for REACT's control plane")
    up.set_defaults(func=_wrap(_cmd_up))

    c = sub.add_parser("congest", help="bulk TCP flows from external namespaces into one host")
    c.add_argument("--into", type=int, help="receiving host (its rank when one rank per host)")
    c.add_argument("--flows", type=int, help="number of external flows P")
    c.add_argument("--duration", type=float, default=None, help="seconds (default: until --stop)")
    c.add_argument("--stop", action="store_true", help="stop all congestion flows")
    bound_counts(c, {"--flows": MAX_EXTERNAL_FLOWS})
    prefix_arg(c)
    c.set_defaults(func=_wrap(_cmd_congest))

    r = sub.add_parser("run", help="run CMD once (or G times) per host namespace, torchrun-style env",
                       usage="reactccl testbed run [--timeout S] [--ranks-per-host G] [--prefix P] -- CMD [ARGS...]")
    r.add_argument("--timeout", type=float, default=600.0, help="seconds before all ranks are killed")
    r.add_argument("--ranks-per-host", type=int, default=1, metavar="G",
                   help="ranks in each host namespace, like torchrun --nproc-per-node (default 1); they talk "
                        "over the namespace's loopback, unshaped, and share the host's shaped link")
    r.add_argument("--master-port", type=int, default=29500)
    prefix_arg(r)
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="command (after --)")
    r.set_defaults(func=_wrap(_cmd_run))

    d = sub.add_parser("down", help="remove every namespace and process of a testbed (exit 1 if there is none)")
    prefix_arg(d)
    d.add_argument("--all", action="store_true", help="remove every testbed with a state file")
    d.set_defaults(func=_wrap(_cmd_down))

    e = sub.add_parser("experiment", help="REACT's testbed experiment (Table 2, Fig 11) on the emulator",
                       description="Baseline vs REACT vs dist.all_reduce under p external flows into one "
                                   "rank (REACT section 7.2); builds and removes its own testbeds.")
    e.add_argument("--hosts", type=int, nargs="+", default=[4, 8])
    e.add_argument("--flows", type=int, nargs="+", default=[0, 1, 2], help="external flow counts p")
    e.add_argument("--rate", default="200mbit")
    e.add_argument("--mbytes", type=float, default=4.0, help="AllReduce size in MB (default 4)")
    e.add_argument("--epochs", type=int, default=30, help="epochs per segment (default 30)")
    e.add_argument("--rounds", type=int, default=2, help="ABAB segments per mode (default 2)")
    e.add_argument("--skip", type=int, default=12, help="first epochs of each mode left out (default 12)")
    e.add_argument("--algorithm", default="nccl-tree")
    e.add_argument("--modes", default="baseline,react,nccl")
    e.add_argument("--victim", type=int, default=None,
                   help="congested host (default: the one receiving most from other hosts)")
    e.add_argument("--ranks-per-host", type=int, default=1, metavar="G",
                   help="ranks per host namespace (default 1); G > 1 runs NCCL's hierarchical pattern on "
                        "the learned servers, one NIC per host")
    e.add_argument("--no-control", action="store_true", help="control plane on the shaped data links")
    e.add_argument("--param", type=_param, action="append", default=[], metavar="NAME=VALUE",
                   help="a REACT parameter for the react mode (reactccl.tuner.ReactParams, e.g. "
                        "estimator=closed), repeatable")
    e.add_argument("--out", default="results/testbed", help="output folder (default results/testbed)")
    bound_counts(e, {"--flows": MAX_EXTERNAL_FLOWS, "--epochs": MAX_EPOCHS, "--rounds": MAX_EPOCHS,
                     "--skip": MAX_EPOCHS})
    e.set_defaults(func=_wrap(_cmd_experiment))

    st = sub.add_parser("status", help="list testbeds that are up")
    st.set_defaults(func=_wrap(_cmd_status))

"""Every count on the command line has an upper bound, said in --help and checked while parsing,
before any work (issue 33: these ran out of memory or generated scenarios for minutes)."""

import time

import pytest

from reactccl.cli import bounds
from reactccl.cli.main import build_parser, main
from reactccl.experiments.sweep import default_jobs

TOO_MANY = [
    ("experiment fig5a --scenarios 1000000000", "argument --scenarios: 1000000000 is above the limit of 10000"),
    ("experiment fig5a --epochs 1000000000", "argument --epochs: 1000000000 is above the limit of 100000"),
    ("experiment fig5a --warmup 1000000000", "argument --warmup: 1000000000 is above the limit of 100000"),
    ("simulate -a ring -n 8 --epochs 1000000000", "argument --epochs/-e: 1000000000 is above the limit of 100000"),
    ("simulate -a ring -n 8 --epochs 1e9", "argument --epochs/-e: expected an integer of at most 100000, got '1e9'"),
    ("simulate -a ring -n 8 --ecmp-ports 1000000000", "argument --ecmp-ports: 1000000000 is above the limit of 1024"),
    ("simulate -a ring -n 8 --ports 1000000000", "argument --ports: 1000000000 is above the limit of 1024"),
    ("simulate -a ring -n 8 --slowest 1000000000", "argument --slowest: 1000000000 is above the limit of 100000"),
    ("simulate -a ring -n 8 --engine packet --replicas 100000", "--replicas: 100000 is above the limit of 256"),
    ("demo --epochs 1000000000", "argument --epochs: 1000000000 is above the limit of 100000"),
    ("demo --ecmp-ports 99999", "argument --ecmp-ports: 99999 is above the limit of 1024"),
    ("perf -n 1000000000", "argument -n/--iters: 1000000000 is above the limit of 100000"),
    ("perf -w 1000000000", "argument -w/--warmup_iters/--warmup-iters: 1000000000 is above the limit of 100000"),
    ("perf --ecmp-ports 5000", "argument --ecmp-ports: 5000 is above the limit of 1024"),
    ("testbed experiment --epochs 1000000000", "argument --epochs: 1000000000 is above the limit of 100000"),
    ("testbed experiment --flows 0 1 1000", "argument --flows: 1000 is above the limit of 64"),
    ("testbed congest --flows 100000", "argument --flows: 100000 is above the limit of 64"),
    ("simulate -a ring -n 8 --epochs ٢", "expected an integer of at most 100000, got '٢'"),
    ("simulate -a ring -n 8 --epochs " + "9" * 3000, "expected an integer of at most 100000, got '999"),
]


@pytest.mark.parametrize("argv, words", TOO_MANY, ids=[a[:60] for a, _ in TOO_MANY])
def test_counts_above_their_bound_are_refused_while_parsing(argv, words, capsys):
    t = time.perf_counter()
    with pytest.raises(SystemExit) as e:
        main(argv.split())
    err = capsys.readouterr().err
    assert e.value.code == 2 and words in err, err
    assert time.perf_counter() - t < 5
    assert max(len(line) for line in err.splitlines()) < 200       # a 3000-digit value is not echoed whole


@pytest.mark.parametrize("command, flag, bound", [
    ("simulate", "--epochs", bounds.MAX_EPOCHS), ("simulate", "--ecmp-ports", bounds.MAX_ECMP_PORTS),
    ("demo", "--epochs", bounds.MAX_EPOCHS), ("experiment", "--scenarios", bounds.MAX_SCENARIOS),
    ("perf", "-n", bounds.MAX_ITERS), ("perf", "-w", bounds.MAX_ITERS),
])
def test_the_bound_is_in_the_help(command, flag, bound):
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    action = sub._option_string_actions[flag]
    assert action.help.endswith(f"[at most {bound}]"), action.help


def test_counts_within_their_bound_are_kept():
    args = build_parser().parse_args(["simulate", "-a", "ring", "-n", "8", "--epochs", "100000", "--ports", "3"])
    assert (args.epochs, args.ports) == (100_000, 3)
    args = build_parser().parse_args(["perf", "-n", "0", "-w", "-1"])    # the lower ends stay the command's
    assert (args.iters, args.warmup) == (0, -1)


def test_jobs_above_the_cpus_are_cut_to_them_with_a_note(capsys):
    cpus = default_jobs()
    args = build_parser().parse_args(["experiment", "fig5a", "--jobs", "100000"])
    assert args.jobs == cpus
    assert capsys.readouterr().err.strip() == (f"reactccl: --jobs 100000 is more than the {cpus} CPUs this process "
                                               f"may use; using {cpus}")
    assert build_parser().parse_args(["experiment", "fig5a", "-j", "1"]).jobs == 1
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv, words", [
    ("sp metrics sp-allreduce --fabric torus:100000x100000", "torus fabric 100000x100000: 10,000,000,000 nodes, "
                                                             "above the limit of 1,048,576"),
    ("sp metrics sp-allreduce --fabric torus:3x3x3x3x3x3x3x3x3x3x3x3x3x3x3", "14,348,907 nodes"),
    ("sp goodput sp-square --sides 8,2000", "torus fabric 2000x2000: 4,000,000 nodes"),
    ("simulate -a ring -n 8 -t dragonfly:a=1000,p=1000,h=1000 -e 1", "the limit is 2,000,000 links"),
])
def test_fabric_sizes_are_refused_before_anything_is_sized_by_them(argv, words, capsys):
    t = time.perf_counter()
    assert main(argv.split()) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err
    assert time.perf_counter() - t < 5

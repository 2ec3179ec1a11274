"""Issue 9 item 5: --version, python -m reactccl, pattern list with options, markup-free help,
one name per option (old names hidden and deprecated), fabric host names, the demo's per-step view."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

import pytest
from rich.console import Console

import reactccl
from reactccl.algorithms import generate
from reactccl.algorithms.registry import options
from reactccl.cli._common import deprecated_alias, plain
from reactccl.cli.demo_cmd import _untreed_note, show
from reactccl.cli.main import build_parser, main
from reactccl.experiments.patterns_view import pattern_view, tree_parents

MARKUP = re.compile(r"``|:(func|mod|class|meth|data|attr):`")


def test_version_and_python_m(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"reactccl {reactccl.__version__}"
    out = subprocess.run([sys.executable, "-m", "reactccl", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"reactccl {reactccl.__version__}"


def test_generator_options_from_signatures():
    # slices: none = NCCL's chunk rule for the message size (given as size, or by perf / simulate)
    servers = [{"name": k, "type": "int or none", "default": None, "required": False}
               for k in ("servers", "gpus", "nics", "channels")] + \
        [{"name": "hierarchy", "type": "one of servers, flat", "default": "servers", "required": False}]
    assert options("nccl-tree") == [{"name": "slices", "type": "int or none", "default": None, "required": False},
                                    {"name": "size", "type": "float or none", "default": None, "required": False},
                                    *servers]
    assert options("ring") == servers
    assert options("k-sp-allreduce")[0] == {"name": "k", "type": "int", "default": 2, "required": False}
    assert options("swing-b")[0]["type"] == "shape or none"
    assert options("recursive-doubling")[0]["type"] == "one of dissemination, fold"
    assert options("sp-spineleaf") == [{"name": "q", "type": "int or none", "default": None, "required": False},
                                       {"name": "tree", "type": "one of star, relay", "default": "star",
                                        "required": False}]
    with pytest.raises(reactccl.pattern.PatternError, match="option tree: expected one of star, relay, got 'x'"):
        generate("sp-spineleaf", 16, tree="x")


def test_pattern_list_text_and_json(capsys):
    assert main(["pattern", "list"]) == 0
    out = capsys.readouterr().out
    assert "options: slices: int or none = none; size: float or none = none" in out
    assert "options: root: int = 0" in out
    assert "options: k: int = 2; shape: shape or none = none; dims: int = 2" in out
    assert main(["pattern", "list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {g["name"]: g for g in doc["generators"]}
    assert doc["schema"] == "reactccl.generators/1" and by["nccl-tree"]["collective"] == "allreduce"
    assert by["binomial-broadcast"]["options"] == [{"name": "root", "type": "int", "default": 0, "required": False}]


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_help_has_no_restructuredtext_markup():
    parsers = list(_parsers(build_parser()))
    assert len(parsers) > 15
    for p in parsers:
        text = p.format_help()
        assert not MARKUP.search(text), f"{p.prog}: {MARKUP.search(text).group(0)!r} in help"
    assert plain("see :func:`a.b` and ``--x`` or :mod:`~p.q`") == "see a.b and --x or q"


def test_one_name_per_option_old_names_hidden_and_deprecated(capsys):
    helps = {p.prog: p.format_help() for p in _parsers(build_parser())}
    assert "--option" in helps["reactccl sp metrics"] and "--opt " not in helps["reactccl sp metrics"]
    assert "--pack " in helps["reactccl sp metrics"] and "--packed" not in helps["reactccl sp metrics"]
    assert "--ecmp-ports" in helps["reactccl simulate"] and "--ports" not in helps["reactccl simulate"]
    # the old names still work, with a warning naming the new one
    assert main(["sp", "metrics", "k-sp-allreduce", "--fabric", "torus:4x4", "--opt", "k=1", "--packed",
                 "--json"]) == 0
    cap = capsys.readouterr()
    assert "--opt is deprecated, use --option" in cap.err and "--packed is deprecated, use --pack" in cap.err
    old = json.loads(cap.out)
    assert main(["sp", "metrics", "k-sp-allreduce", "--fabric", "torus:4x4", "-O", "k=1", "--pack", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == old
    assert main(["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-e", "1", "--ports", "2", "--json"]) == 0
    cap = capsys.readouterr()
    assert "--ports is deprecated, use --ecmp-ports" in cap.err and json.loads(cap.out)["ecmp_ports"] == 2
    p = argparse.ArgumentParser(prog="x")
    with pytest.raises(ValueError, match="'--new' is not an option of 'x'"):
        deprecated_alias(p, "--old", "--new")


def test_simulate_prints_fabric_host_names_and_no_ecmp_on_fixed_routes(capsys):
    assert main(["simulate", "-a", "ring", "-n", "9", "-t", "torus:3x3", "-e", "1"]) == 0
    out = capsys.readouterr().out
    assert "placement: r0=n0, r1=n1" in out and "r8=n8" in out and "fixed routes" in out
    assert "ECMP" not in out.splitlines()[0]
    assert main(["simulate", "-a", "ring", "-n", "9", "-t", "torus:3x3", "-e", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["placement_hosts"][:2] == ["n0", "n1"] and doc["routes"] == "fixed"
    assert main(["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-e", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "4 ECMP ports" in first


def test_window_swap_is_not_shown_as_a_tree():
    p = generate("nccl-tree", 8)
    assert tree_parents(p, 1) is not None
    # the demo's swaps: ranks 3 <-> 5 in steps 1-2, then 3 <-> 1 in steps 1-5 of tree 1
    from reactccl.pattern import verify
    from reactccl.tuner.transforms import Swap, Transform
    for a, b, t0, t1 in ((3, 5, 1, 2), (3, 1, 1, 5)):
        perm = list(range(8))
        perm[a], perm[b] = b, a
        p = p.relabel(perm, flows=Swap(Transform.POSITION, a, b, graph=1, t0=t0, t1=t1).mask(p))
    verify(p)
    assert tree_parents(p, 1) is None  # its broadcast no longer runs down its reduce tree
    assert dict(pattern_view(p))["graph 1"] == ("t0: 0>1+ 2>1+ 4>5+ 6>5+ | t1: 3>5+ 1>5+ | t2: 5>7+ | t3: 7>1= | "
                                                "t4: 1>3= 1>5= | t5: 3>0= 3>2= 5>4= 5>6=")


def test_demo_says_when_the_after_pattern_is_no_tree():
    from reactccl.experiments.demo import DemoConfig, run_demo
    res = run_demo(DemoConfig(epochs=30, warmup=10))
    note = _untreed_note(res)
    assert note is not None and note.startswith("After REACT's position swaps chunk graph") and "no longer" in note
    console = Console(record=True, width=250)
    show(res, console)
    text = console.export_text()
    assert note in text.replace("\n", " ") or note[:60] in text
    assert "t0: " in text and " | t1: " in text   # per-step view: tN: src>dst+ (reduce) / = (copy)

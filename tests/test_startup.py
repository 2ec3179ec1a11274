"""The first minute: what ``reactccl`` imports before it works, which kernels a command compiles,
and that the demo's choice of engine changes nothing it prints. Imports are checked in a fresh
interpreter (the test process has everything loaded already); times are in bench/bench_startup.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reactccl.algorithms import generate
from reactccl.cli.commands import COMMANDS, HELP, command_named
from reactccl.cli.compile_notice import family_of
from reactccl.cli.main import build_parser, main
from reactccl.experiments.demo import DemoConfig, netsim_engine, run_demo

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "numba", "scipy", "networkx", "matplotlib", "rich", "torch")


def _modules_after(code: str) -> set[str]:
    """Top-level packages loaded after running ``code`` in a fresh interpreter (of HEAVY)."""
    probe = code + "\nimport sys, json\nprint('MODS' + json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    line = [x for x in out.stdout.splitlines() if x.startswith("MODS")]
    assert line, out.stderr[-2000:]
    return set(json.loads(line[0][4:])) & set(HEAVY)


def test_version_and_help_import_nothing_heavy():
    code = ("from reactccl.cli.main import main\n"
            "for argv in (['--version'], ['--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit as e:\n        assert e.code == 0\n")
    assert _modules_after(code) == set()


def test_pattern_verify_loads_numpy_only(tmp_path):
    f = tmp_path / "ring16.json"
    assert main(["pattern", "generate", "ring", "--ranks", "16", "-o", str(f)]) == 0
    code = f"from reactccl.cli.main import main\nassert main(['pattern', 'verify', {str(f)!r}]) == 0\n"
    assert _modules_after(code) == {"numpy"}


def test_a_few_verifies_stay_on_the_numpy_count_and_many_switch_to_the_compiled_one():
    code = ("import sys\nfrom reactccl.algorithms import generate\nfrom reactccl.pattern import verify\n"
            "import reactccl.pattern\nv = sys.modules['reactccl.pattern.verify']\n"
            "p = generate('ring', 4)\nfor _ in range(50): verify(p)\n"
            "assert 'reactccl.pattern.verify_fast' not in sys.modules\n"
            "v.COMPILED_AFTER = 60\nfor _ in range(11): verify(p)\n"
            "assert 'reactccl.pattern.verify_fast' in sys.modules\n")
    assert "numba" in _modules_after(code)


def test_help_lists_every_command_of_the_table_as_its_module_registers_it():
    full = build_parser()._subparsers._group_actions[0]
    registered = {a.dest: a.help for a in full._choices_actions}
    assert registered == HELP
    assert [c.name for c in COMMANDS] == list(full.choices)


def test_a_command_loads_its_own_parser_only():
    parser = build_parser(["pattern", "verify", "x.json"])
    choices = parser._subparsers._group_actions[0].choices
    assert choices["pattern"]._subparsers is not None         # the real one, with its actions
    assert choices["simulate"]._actions == []                 # a placeholder (add_help=False, no arguments)


def test_command_help_still_works(capsys):
    with pytest.raises(SystemExit) as e:
        main(["simulate", "--help"])
    assert e.value.code == 0 and "--topology" in capsys.readouterr().out


def test_command_named_skips_top_level_flags():
    assert command_named(["--version"]) is None
    assert command_named(["-h", "demo"]) == "demo"
    assert command_named(["simulate", "-a", "ring"]) == "simulate"


@pytest.mark.parametrize("typed, meant", [("simulat", "simulate"), ("Demo", "demo"), ("experiments", "experiment")])
def test_unknown_command_says_did_you_mean(typed, meant, capsys):
    with pytest.raises(SystemExit) as e:
        main([typed])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"unknown command {typed!r} (did you mean {meant!r}?)" in err


def test_compile_notice_names_the_family_once():
    code = ("import io, numba\nfrom reactccl.cli.compile_notice import install\nbuf = io.StringIO()\n"
            "assert install(buf)\n"
            "g = {'__name__': 'reactccl.tuner._probe'}\n"
            "exec('def f(x):\\n    return x + 1\\ndef h(x):\\n    return x * 2\\n', g)\n"
            "f, h = numba.njit(g['f']), numba.njit(g['h'])\nf(1); h(1); f(1.5)\n"
            "assert buf.getvalue().count('compiling') == 1, buf.getvalue()\n"
            "assert \"compiling REACT's kernels (numba), once per install: about 29 s\" in buf.getvalue()\n")
    assert "numba" in _modules_after(code)
    assert _modules_after("from reactccl.cli.compile_notice import install\nassert not install()\n") == set()


def test_families():
    assert family_of("reactccl.netsim.core")[0] == "the simulator's kernels"
    assert family_of("reactccl.pattern.deps")[0] == "the pattern kernels"
    assert family_of("numpy.linalg") is None


def test_demo_runs_small_scenarios_on_the_reference_engine(monkeypatch):
    monkeypatch.delenv("REACTCCL_NETSIM_ENGINE", raising=False)
    assert generate("nccl-tree", 8).num_flows == 28
    assert netsim_engine(DemoConfig()) == "python"
    assert netsim_engine(DemoConfig(algorithm="ring", ranks=16, topology="star:hosts=17")) is None   # 480 flows
    assert netsim_engine(DemoConfig(p=9)) is None
    monkeypatch.setenv("REACTCCL_NETSIM_ENGINE", "compiled")
    assert netsim_engine(DemoConfig()) is None


def test_the_demo_prints_the_same_on_either_engine(monkeypatch):
    def demo() -> dict:
        doc = run_demo(DemoConfig()).to_json()
        doc.pop("wall_s")
        return doc

    monkeypatch.delenv("REACTCCL_NETSIM_ENGINE", raising=False)
    reference = demo()
    monkeypatch.setenv("REACTCCL_NETSIM_ENGINE", "compiled")
    compiled = demo()
    assert reference["decisions"], "the default demo makes a decision"
    assert reference == compiled

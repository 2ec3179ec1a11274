"""``reactccl simulate``: flags given without what they need, out-of-range flags named, and the
up-front warning for patterns with many flows per link and round."""

import argparse
import io

import pytest
from rich.console import Console

from reactccl.cli import simulate_cmd
from reactccl.cli.main import main

BASE = ["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=6", "-s", "1MB", "-e", "2"]


@pytest.mark.parametrize("extra, message", [
    (["--warmup", "40"], "--warmup: only used with --react"),
    (["--param", "B=6"], "--param: only used with --react"),
    (["--seed", "-1"], "--seed: expected a non-negative integer, got -1"),
    (["--slowest", "-2"], "--slowest: expected a non-negative integer, got -2"),
    (["--react", "--pack"], "--pack: cannot be used with --react"),
])
def test_bad_flag_combinations_are_named(capsys, extra, message):
    assert main(BASE + extra) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def _args(**kw):
    base = dict(algorithm="sp-allreduce", ranks=9, option=None, pack=False, react=False)
    return argparse.Namespace(**{**base, **kw})


def _warning(monkeypatch, **kw):
    monkeypatch.setattr(simulate_cmd, "SLOW_FLOWS", 500)
    out = io.StringIO()
    pattern = simulate_cmd.pattern_for(_args(**kw), Console(file=out, width=400, soft_wrap=True))
    return pattern, " ".join(out.getvalue().split())


def test_many_flows_per_link_warns_and_names_pack(monkeypatch):
    # SP-allreduce on T_3^2: 36 chunk graphs x 16 flows = 576 flows; packed 4 rounds x 36 links = 144
    pattern, text = _warning(monkeypatch)
    assert pattern.num_flows == 576
    assert ("sp-allreduce on 9 ranks has 576 flows per epoch in 36 chunk graphs, 4.0 per link and round"
            in text)
    assert "Add --pack to send one message per link and round (144 flows)" in text
    _, text = _warning(monkeypatch, react=True)
    assert "cannot be used with --react" in text and "Add --pack" not in text
    pattern, text = _warning(monkeypatch, pack=True)
    assert (pattern.num_flows, text) == (144, "")


def test_no_warning_when_packing_would_not_help(monkeypatch):
    # a ring has one flow per link and round already: 2 * 16 * 17 = 544 flows (>= 500), nothing to pack
    pattern, text = _warning(monkeypatch, algorithm="ring", ranks=17)
    assert (pattern.num_flows, text) == (544, "")


def test_pack_instance_keeps_instances_apart():
    # Swing-B on 6x6: 2d = 4 mirrored instances of 36 chunks (instance = chunk // 36). Packing per
    # round merges flows of different instances on one link; per instance it must not.
    import numpy as np

    from reactccl.pattern import verify

    by_round = simulate_cmd.pattern_for(_args(algorithm="swing-b", ranks=36, pack="round"))
    by_inst = simulate_cmd.pattern_for(_args(algorithm="swing-b", ranks=36, pack="instance"))
    for p in (by_round, by_inst):
        verify(p)
    mixed = []
    for p in (by_round, by_inst):
        inst = p.chunk_idx // 36
        first = np.repeat(inst[p.chunk_ptr[:-1]], np.diff(p.chunk_ptr))
        mixed.append(bool((inst != first).any()))
    assert mixed == [True, False]
    assert by_round.num_flows < by_inst.num_flows < 10080


def test_pack_of_an_empty_collective(capsys):
    # one rank: no flows, nothing to pack; the usual "empty" summary, no error
    assert main(["simulate", "-a", "ring", "-n", "1", "-t", "star:hosts=2", "-e", "2", "--pack"]) == 0
    assert "the collective is empty (0 flows, 1 rank)" in capsys.readouterr().out


def test_slowest_zero_prints_no_table(capsys):
    # --slowest 0 used to print the table's title and header with no rows
    assert main([*BASE, "--slowest", "0"]) == 0
    out = capsys.readouterr().out
    assert "mean busbw" in out and "slowest flows" not in out and "FCT" not in out
    assert main([*BASE, "--slowest", "1"]) == 0
    out = capsys.readouterr().out
    assert "slowest flows" in out and out.count("→h") == 1


def test_a_picture_format_matplotlib_cannot_write_is_refused_before_the_run(tmp_path, capsys):
    # --plot p.xyz used to fail only after the whole simulation, in savefig
    bad = tmp_path / "p.xyz"
    assert main([*BASE, "--plot", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--plot {bad}: format 'xyz' cannot be written" in err and "png" in err and "simulated in" not in err
    assert not bad.exists()
    assert main([*BASE, "--timeline", str(tmp_path / "t.bmp")]) == 2
    assert "--timeline" in capsys.readouterr().err
    assert main([*BASE, "--plot", str(tmp_path / "noext")]) == 2   # matplotlib would write noext.png
    assert "no format suffix" in capsys.readouterr().err
    good = tmp_path / "p.JPG"
    assert main([*BASE, "--plot", str(good)]) == 0 and good.stat().st_size > 0

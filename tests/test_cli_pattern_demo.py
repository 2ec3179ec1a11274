"""``reactccl pattern`` (options as text, a closed output pipe) and ``reactccl demo`` input errors."""

import json
import subprocess
import sys

import pytest

from reactccl.cli.demo_cmd import fitting_topologies
from reactccl.cli.main import main
from reactccl.cli.options import parse_options


def _read_then_close(args: list[str], lines: int) -> tuple[list[bytes], str, int]:
    """Run ``reactccl ARGS``, read ``lines`` lines of its stdout, close the pipe; returns the lines
    read, stderr and the exit code (a 60 s timeout)."""
    cmd = [sys.executable, "-m", "reactccl.cli.main", *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = [proc.stdout.readline() for _ in range(lines)]
    proc.stdout.close()
    err = proc.stderr.read()
    return got, err.decode(), proc.wait(timeout=60)


def test_closed_pipe_ends_quietly():
    # `reactccl pattern show ... | head -1`: the output (~300 KB) overflows the pipe, the reader
    # closes it after one line; the command must stop without an error message
    first, err, rc = _read_then_close(["pattern", "show", "ring", "-n", "128", "--max-steps", "300"], 1)
    assert first[0].startswith(b"CollectivePattern('ring'")
    assert (err, rc) == ("", 141)


@pytest.mark.parametrize("args", [["simulate", "-a", "ring", "-n", "8", "-t", "star:hosts=8", "-e", "2"],
                                  ["experiment", "list"]])
def test_closed_pipe_is_141_for_rich_output_too(args):
    # these print through rich, whose Console.on_broken_pipe would exit 1: the reader closes the
    # pipe before the first line, so the command's first write fails
    got, err, rc = _read_then_close(args, 0)
    assert (got, rc) == ([], 141)
    assert "Traceback" not in err and "Error" not in err


def test_options_reach_the_generator_as_text(capsys):
    assert parse_options(["shape=8", "k=2.0", "tree=true", "a-b= 3 "]) == {
        "shape": "8", "k": "2.0", "tree": "true", "a_b": "3"}
    assert parse_options(["B=6", "tau_r=0.1", "x=false"], typed=True) == {"B": 6, "tau_r": 0.1, "x": False}
    # shape=8 is a one-side shape (8,), not the integer 8
    assert main(["pattern", "generate", "bucket", "-n", "8", "--option", "shape=8"]) == 0
    assert json.loads(capsys.readouterr().out)["num_ranks"] == 8
    # slices=2.0 is not an integer: refused instead of silently read as 2
    assert main(["pattern", "generate", "nccl-tree", "-n", "8", "--option", "slices=2.0"]) == 2
    assert "option slices: expected an integer, got '2.0'" in capsys.readouterr().err


def test_fitting_topologies():
    assert fitting_topologies(16) == "star:hosts=16 or fat-tree:k=4 (16 hosts)"
    assert fitting_topologies(17) == "star:hosts=17 or fat-tree:k=6 (54 hosts)"


def test_demo_too_few_hosts_suggests_a_topology(capsys):
    assert main(["demo", "--ranks", "16"]) == 2
    out = capsys.readouterr()
    assert out.out == ""  # checked before any progress bar is drawn
    err = " ".join(out.err.split())
    assert "error: --ranks 16: the demo needs 17 hosts" in err and "star:hosts=16 has 16" in err
    assert "--topology star:hosts=17 or fat-tree:k=6 (54 hosts)" in err


def test_demo_flag_errors_before_progress(capsys):
    for argv, message in ((["--seed", "-1"], "error: --seed: expected an integer >= 0, got -1"),
                          (["--epochs", "30", "--warmup", "40"],
                           "error: --warmup: must satisfy 0 <= warmup < epochs (30), got 40"),
                          (["--topology", "torus:1x8"], "every torus side must be >= 3")):
        assert main(["demo", *argv]) == 2
        out = capsys.readouterr()
        assert out.out == "" and message in " ".join(out.err.split()) and "error: error:" not in out.err

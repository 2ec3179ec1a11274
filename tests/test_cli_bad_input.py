"""Issue 11: no bad invocation ends in a traceback. Each one exits 2 with one line on stderr
(nothing on stdout), and the line names what is wrong. In-process calls of
``reactccl.cli.main.main`` (fast); a subprocess only where the entry point is a script."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reactccl.algorithms import generate
from reactccl.cli.main import main
from reactccl.pattern import dumps
from reactccl.topology.units import parse_bytes, parse_size
from reactccl.trace import format_bytes, format_rate

ROOT = Path(__file__).resolve().parents[1]

# (argv, words the one line must contain)
BAD = [
    # the cases
    ("simulate -a ring -n 4 --epochs 2 --degrade random:k=0:rate=30G", "degrade random: k must be"),
    ("sp metrics sp-allreduce --max-memory 0", "--max-memory"),
    ("pattern generate ring --ranks 4 -o /dev/full", "/dev/full: No space left on device"),
    ("simulate -a ring -n 4 --epochs 2 --size 1e-3", "not a whole number of bytes"),
    ("demo --size 1e-3", "--size: '1e-3' is 0.001 bytes"),
    ("sp metrics sp-allreduce --size 1e-3", "--size: '1e-3'"),
    ("demo --ranks 1", "--ranks: expected an integer >= 2"),
    ("experiment fig5a --quick --param X=1", "--param X: not a REACT parameter"),
    ("demo --algorithm nosuch", "nosuch"),
    # found by trying
    ("experiment fig5a --quick --param B=0", "ReactParams.B"),
    ("experiment fig5a --quick --epochs 0", "epochs: expected >= 1"),
    ("experiment fig5a --quick --warmup 40", "warmup"),
    ("experiment nosuch", "unknown experiment 'nosuch'"),
    ("experiment sp-square --quick --epochs 3", "--epochs does not apply"),
    ("simulate -a ring -n 4 --epochs 2 --degrade random:k=2", "missing field 'rate'"),
    ("simulate -a ring -n 4 --size 2PB", "unknown unit 'PB'"),
    ("simulate -a ring -n 4 --size 0", "size: must be a positive"),
    ("simulate -a ring -n 4 --topology fat-tree:k=3", "even k"),
    ("simulate -a ring -n 4 --placement 0,0,0,0", "host 0 given for more than one rank"),
    ("simulate -a ring -n 4 --react --param X=1 --epochs 2", "--param X"),
    ("simulate -a nosuch -n 4", "nosuch"),
    ("sp metrics sp-allreduce --option k", "--option: expected KEY=VALUE"),
    ("sp ksp --fabric torus:4x4 --ks 99", "--ks 99: a k-SP depth bound is in 1..H = 4"),
    ("sp metrics sp-allreduce --link-rate 400", "did you mean 400Gbps"),
    ("sp metrics nosuch", "nosuch"),
    ("sp ksp --fabric torus:3x4", "equal sides"),
    ("sp goodput sp-square --sizes 0 --quick", "--sizes"),
    ("pattern generate ring --ranks 0", "num_ranks"),
    ("pattern generate ring --ranks 4 -O noequals", "KEY=VALUE"),
    ("pattern generate ring --ranks 4 -o /nonexistent/dir/x.json", "/nonexistent/dir/x.json: No such file"),
    ("pattern show /nonexistent.json", "neither a file nor"),
    ("pattern show {tmp}", "Is a directory"),
    ("pattern show {tmp}/bad-utf8.json", ""),   # (`pattern verify` answers FAIL, exit 1, for a bad file)
    ("pattern show {tmp}/deep.json", ""),
    ("demo --epochs 0", "--epochs"),
    ("demo --p 100000", "--p: at most 64"),
    ("demo --topology star:hosts=3", "needs 9 hosts"),
    ("demo --size 20XB", "unknown unit 'XB'"),
    # a newcomer's review
    ("simulate -a nccl-tree -n 8 -t star:hosts=16 --epochs 2 -b into::p=2", "no ranks given"),
    ("simulate -a nccl-tree -n 8 -t star:hosts=16 --epochs 2 -b into:3:p=2:p=3", "field 'p' given twice"),
    ("simulate -a ring -n 4 --epochs 1 -t fat-tree:k=4:k=6", "key 'k' given twice"),
    ("simulate -a ring -n 4 --epochs 1 -t star:hosts=16:rate=1GB", "reads as bytes per second"),
    ("simulate -a ring -n 4 --epochs 1 -O slices=3 -O slices=4", "'slices' given twice"),
    ("simulate -a ring -n 8 --epochs 30 --react --param seed=-1", "ReactParams.seed"),
    ("simulate -a ring -n 8 --epochs 3 --react --param B", "--param 'B': expected KEY=VALUE"),
    ("simulate -a ring -n 4 --epochs 2 --degrade link=12", "job:k=K:rate=R"),
    ("pattern export ring -n 8 --max-channels 0 -o x.xml", "--max-channels: expected an integer >= 1"),
    ("perf -b 1 -e 1G -i 1 --algorithm ring --ranks 4 --topology star:hosts=8", "more than 10,000 sizes; use -i 107385"),
    ("perf -b 1K -e 1K --algorithm , --ranks 4 --topology star:hosts=8", "no algorithm given"),
    ("experiment sp-rect --quick --engine packet", "--engine does not apply"),
    ("simulate -a ring -n 4 --epochs 1 -s -1MB", "--size: must be a positive finite number, got '-1MB'"),
    ("perf -b -1K -e 4K --algorithm ring --ranks 4 --topology star:hosts=8", "-b/--minbytes: must be a positive"),
    ("pattern show ring -n 4 --max-steps -1", "--max-steps -1: must be 0 (every step) or more"),
    ("pattern show r4.json -n 4", "--ranks applies to an algorithm name, not to the file 'r4.json'"),
    # output files are checked before the run, not after it
    ("simulate -a ring -n 4 --epochs 2 --plot /nonexistent/p.png", "--plot /nonexistent/p.png: no folder"),
    ("simulate -a ring -n 4 --epochs 2 --react --save-pattern {tmp}", "is a folder"),
    ("demo --save-pattern /nonexistent/x.json", "--save-pattern /nonexistent/x.json: no folder"),
    ("perf -b 1K -e 4K --algorithm ring --ranks 4 --topology star:hosts=8 --plot /nonexistent/bw.png",
     "no folder /nonexistent"),
    # nccl-tests' -a, -t, -g, -G: their meanings, or a refusal that says what to use
    ("perf -b 1K -e 1K -a ring", "-a/--average ring: nccl-tests' average mode, 0 (rank 0), 1 (mean), 2 (min) or 3 (max); "
                                 "-a no longer names the algorithm: use --algorithm ring"),
    ("perf -b 1K -e 1K -t fat-tree:k=4", "-t no longer names the topology: use --topology fat-tree:k=4"),
    ("perf -b 1K -e 1K -t 4", "-t/--nthreads 4: nccl-tests' threads per process do not apply"),
    ("perf -b 1K -e 1K -g 8", "-g/--ngpus 8: nccl-tests' GPUs per thread do not apply"),
    ("perf -b 1K -e 1K -G 10", "-G/--cudagraph 10: CUDA graph launches do not apply"),
    ("perf -b 1K -e 1K -o prod", "-o prod: our patterns reduce by adding"),
    ("perf -b 1K -e 1K --collective all_to_all_v", "--collective all_to_all_v (did you mean 'alltoall'?): expected one of all_reduce, all_gather"),
    ("perf -b 1K -e 1K --collective alltoall --algorithm ring", "--algorithm ring: computes allreduce, not "
                                                                "--collective alltoall"),
    ("perf -b 1K -e 1K --algorithm ring,alltoall-bruck", "one collective per sweep; got ring (allreduce), "
                                                         "alltoall-bruck (alltoall)"),
    ("perf -b 1K -e 1K -J out.txt", "-J/--output_file out.txt: the name must end in .json or .csv"),
]


@pytest.fixture()
def files(tmp_path):
    (tmp_path / "bad-utf8.json").write_bytes(b"\xff\xfe{}")
    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000)
    (tmp_path / "r4.json").write_text(dumps(generate("ring", 4)))
    return tmp_path


@pytest.mark.parametrize("argv, words", BAD, ids=[a for a, _ in BAD])
def test_bad_invocation_exits_2_with_one_line(argv, words, files, capsys, monkeypatch):
    monkeypatch.chdir(files)   # nothing an experiment could write lands in the repo
    code = main(argv.format(tmp=files).split())
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert out == "", out
    assert len(lines) == 1 and "Traceback" not in err, err
    assert words in lines[0], lines[0]


@pytest.mark.parametrize("argv", ["simulate -a ring -n four", "demo --ranks x", "sp goodput nosuch"])
def test_argparse_errors_exit_2_without_traceback(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv.split())
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err and err.strip().splitlines()[-1].startswith("reactccl")


def test_experiment_warmup_follows_the_epochs_given(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    assert main(["experiment", "fig12", "--quick", "--epochs", "5", "--no-progress", "--out", str(files)]) == 0
    import json
    cfg = json.loads((files / "fig12-epochs5-quick.json").read_text())["config"]
    assert (cfg["epochs"], cfg["warmup"]) == (5, 1)   # the quick warm-up (10) is longer: a quarter of 5
    assert "warmup" not in capsys.readouterr().err


def test_refused_experiment_leaves_no_output_folder(tmp_path, capsys):
    out = tmp_path / "a" / "b"
    assert main(["experiment", "fig5a", "--scenarios", "0", "--out", str(out)]) == 2
    assert "scenarios: expected >= 1" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()         # both folders it made are gone again
    (tmp_path / "kept").mkdir()
    assert main(["experiment", "fig5a", "--epochs", "0", "--out", str(tmp_path / "kept")]) == 2
    assert (tmp_path / "kept").is_dir()          # a folder that was there stays


def test_demo_warmup_follows_a_short_run(capsys):
    """--epochs 10 alone: the warm-up default (25) would be past the run; a quarter of it is used."""
    assert main(["demo", "--epochs", "10", "--no-progress"]) == 0
    assert "After the warm-up (epochs 2..9)" in capsys.readouterr().out


def test_demo_progress_on_stderr_and_small_rates_switch_units(capsys):
    assert main(["demo", "--ranks", "4", "--epochs", "3", "--warmup", "1", "--size", "100", "--p", "1",
                 "--topology", "star:hosts=5"]) == 0
    out, err = capsys.readouterr()
    assert "0.000 GB/s" not in out and ("MB/s" in out or "KB/s" in out)
    assert "3/3" in err and "3/3" not in out        # the progress bars went to stderr


def test_sizes_and_rates_units():
    assert parse_size("1TB") == 1e12 and parse_size("2TiB") == 2 * 2 ** 40 and parse_bytes("3tb") == 3 * 10 ** 12
    assert format_bytes(2.5e12) == "2.5 TB" and format_bytes(999) == "999 B"
    assert format_bytes(0.25) == "0.25 B" and format_bytes(12) == "12 B"   # a 1 B message's chunk on 4 ranks
    assert format_rate(2.5e9) == "2.500 GB/s (20.00 Gbps)"
    assert format_rate(4.2e5) == "420.000 KB/s (3.36 Mbps)"
    assert format_rate(5e7) == "50.000 MB/s (0.40 Gbps)"
    assert format_rate(0) == "0 B/s (0 bps)"


def _script(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)


def _entry(script: str):
    """``main`` of an example script or of the testbed worker, imported in this process."""
    if script == "worker":
        from reactccl.testbed.worker import main as worker_main
        return worker_main
    import importlib.util
    spec = importlib.util.spec_from_file_location(Path(script).stem, ROOT / script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


@pytest.mark.parametrize("script, argv, words", [
    ("examples/train_ddp.py", ["--steps", "0"], "--steps: expected an integer >= 1"),
    ("examples/train_ddp.py", ["--algorithm", "nosuch"], "--algorithm 'nosuch': unknown"),
    ("examples/train_ddp.py", ["--algorithm", "ring-allgather"], "needs an allreduce"),
    ("examples/rcollective_basic.py", ["--ranks", "0"], "--ranks: expected 1..64"),
    ("examples/rcollective_basic.py", ["--algorithm", "nosuch"], "--algorithm 'nosuch': unknown"),
    ("worker", ["--algorithm", "nosuch", "--out", "x.json"], "unknown"),
    ("worker", ["--epochs", "0", "--out", "x.json"], "--epochs"),
    ("worker", ["--react", "[1]", "--out", "x.json"], "--react: expected a JSON object"),
])
def test_rank_entry_points_refuse_bad_arguments_before_the_group(script, argv, words, capsys):
    pytest.importorskip("torch")
    with pytest.raises(SystemExit) as e:   # argparse's error, before init_process_group would wait
        _entry(script)(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err, err
    assert words in err.strip().splitlines()[-1]


def test_console_script_process_exit_code():
    cp = _script("-m", "reactccl.cli.main", "pattern", "generate", "ring", "--ranks", "4", "-o", "/dev/full")
    assert cp.returncode == 2 and cp.stdout == "" and cp.stderr == "error: /dev/full: No space left on device\n"


@pytest.mark.parametrize("argv", ["simulate -a ring -n 4 -t foo", "perf --algorithm foo -b 1K -e 1K",
                                  "demo --topology foo", "pattern generate foo -n 4"])
def test_traceback_on_request_for_every_subcommand(argv, capsys, monkeypatch):
    """REACTCCL_TRACEBACK=1 adds the traceback before the one line, whichever subcommand failed."""
    monkeypatch.setenv("REACTCCL_TRACEBACK", "1")
    assert main(argv.split()) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "foo" in err.strip().splitlines()[-1]

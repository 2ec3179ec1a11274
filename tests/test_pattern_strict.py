"""Strict reading of pattern files (issue 33): repeated keys, over-long integers, echoed values,
files that are not regular, outputs that are inputs, sparse step numbers."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.cli.main import main
from reactccl.pattern import PatternError, dumps, loads, to_dict, to_msccl_xml
from reactccl.pattern.files import load_pattern

ROOT = Path(__file__).resolve().parents[1]


def _one_line_error(capsys, argv, *words):
    assert main(argv) == 2
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in cap.err, cap.err[:500]
    for w in words:
        assert w in lines[0], lines[0][:500]
    return lines[0]


def test_a_key_given_twice_is_refused_naming_it(tmp_path, capsys):
    text = dumps(generate("ring", 3))
    twice = text.replace('"collective": "allreduce"', '"collective": "allgather", "collective": "allreduce"', 1)
    with pytest.raises(PatternError, match="key 'collective' given twice in one object"):
        loads(twice)
    inner = text.replace('"step": 0,', '"step": 0, "step": 3,', 1)
    with pytest.raises(PatternError, match="key 'step' given twice in one object .*step, step, src"):
        loads(inner)
    f = tmp_path / "twice.json"
    f.write_text(twice)
    _one_line_error(capsys, ["pattern", "verify", str(f)], "key 'collective' given twice")


@pytest.mark.parametrize("field, where", [("num_ranks", "num_ranks"), ("step", "flows[0].step"),
                                          ("size", "chunks[0].size"), ("id", "chunks[0].id")])
def test_an_integer_too_long_to_convert_names_its_field(field, where):
    d = to_dict(generate("ring", 3))
    target = d if field == "num_ranks" else d["chunks"][0] if field in ("size", "id") else d["flows"][0]
    target[field] = "HUGE"
    text = json.dumps(d).replace('"HUGE"', "7" * 5000)
    with pytest.raises(PatternError, match=rf"^{where.replace('[', '.').replace(']', '.')}: an integer of 5000 "
                                           "digits is out of range") as e:
        loads(text)
    assert len(str(e.value)) < 100


def test_echoed_values_are_short_excerpts(tmp_path, capsys):
    d = to_dict(generate("ring", 3))
    for key, value in (("collective", "x" * 1_000_000), ("schema", "y" * 1_000_000)):
        f = tmp_path / f"{key}.json"
        f.write_text(json.dumps({**d, key: value}))
        line = _one_line_error(capsys, ["pattern", "verify", str(f)], f"{key}: ", "... (1000002 chars)")
        assert len(line) < 300
    d["flows"][1]["z" * 500_000] = 1
    f = tmp_path / "field.json"
    f.write_text(json.dumps(d))
    assert len(_one_line_error(capsys, ["pattern", "show", str(f)], "flows[1]: unknown field 'zzz")) < 300


def test_an_error_line_is_cut_whatever_its_source(capsys):
    line = _one_line_error(capsys, ["pattern", "show", "n" * 200_000], "... (2000")
    assert len(line) <= 1000 + len("error: ")


@pytest.mark.parametrize("argv", [["pattern", "verify", "{f}"], ["pattern", "show", "{f}"],
                                  ["pattern", "import", "{f}"], ["simulate", "--pattern", "{f}", "-e", "1"]])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path, argv):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    cmd = [sys.executable, "-m", "reactccl", *(a.format(f=fifo) for a in argv)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)   # blocked forever before
    assert r.returncode == 2 and f"{fifo}: is a FIFO, not a regular file" in r.stderr, r.stderr


def test_devices_and_folders_are_refused_before_reading(tmp_path):
    with pytest.raises(PatternError, match="/dev/null: is a device, not a regular file"):
        load_pattern("/dev/null")
    with pytest.raises(IsADirectoryError):
        load_pattern(tmp_path)


def test_an_output_that_is_an_input_is_refused(tmp_path, capsys):
    xml = tmp_path / "x.xml"
    text = to_msccl_xml(generate("ring", 4))
    xml.write_text(text)
    _one_line_error(capsys, ["pattern", "import", str(xml), "-o", str(xml)],
                    f"--output {xml}: is the input FILE.xml {xml}; write to another file")
    link = tmp_path / "link.xml"
    link.symlink_to(xml)
    hard = tmp_path / "hard.xml"
    os.link(xml, hard)
    for other in (link, hard):
        _one_line_error(capsys, ["pattern", "import", str(xml), "-o", str(other)], "is the input FILE.xml")
    assert xml.read_text() == text            # the input was never touched
    js = tmp_path / "p.json"
    js.write_text(dumps(generate("ring", 4)))
    _one_line_error(capsys, ["pattern", "export", str(js), "--to", "json", "-o", str(js)], "is the input FILE")
    _one_line_error(capsys, ["simulate", "--pattern", str(js), "-t", "star:hosts=4", "-e", "1", "--save-pattern",
                             str(js)], f"--save-pattern {js}: is the input --pattern")
    _one_line_error(capsys, ["simulate", "--pattern", str(js), "-t", "star:hosts=4", "-e", "1", "--plot",
                             str(tmp_path / "." / "p.json")], "--plot")
    assert loads(js.read_text()).num_flows == generate("ring", 4).num_flows


def _sparse(tmp_path):
    p = generate("ring", 4)
    q = p.replace(step=p.step * 2_000_000)          # steps 0, 2e6, 4e6, ...: same order, same meaning
    f = tmp_path / "sparse.json"
    f.write_text(json.dumps(to_dict(q)))
    return p, f


def test_sparse_steps_are_compacted_for_every_command(tmp_path, capsys):
    p, f = _sparse(tmp_path)
    got = load_pattern(f)
    assert np.array_equal(got.step, p.step) and got.num_steps == p.num_steps == 6
    assert main(["pattern", "verify", str(f)]) == 0
    assert "24 flows, 6 steps;" in capsys.readouterr().out
    base = ["simulate", "--pattern", str(f), "-t", "star:hosts=4", "-s", "1MB", "--json"]
    assert main([*base, "-e", "2"]) == 0
    dense = json.loads(capsys.readouterr().out)
    assert main(["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-s", "1MB", "--json", "-e", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["durations_s"] == dense["durations_s"]
    assert main([*base, "-e", "4", "--react", "--warmup", "1"]) == 0       # refused for 1 GiB of tables before
    capsys.readouterr()
    out = tmp_path / "sparse.xml"
    assert main(["pattern", "export", str(f), "-o", str(out)]) == 0
    assert out.read_text() == to_msccl_xml(p)

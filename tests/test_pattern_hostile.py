"""Hostile pattern files and step numbers: one-line named errors, never a traceback (issue 11)."""

import json
import re

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.cli.main import main
from reactccl.pattern import PatternError, load, loads, to_dict
from reactccl.pattern.ir import MAX_INDEX


def _doc(**change):
    d = to_dict(generate("ring", 3))
    d.update(change)
    return d


def _cli_error(capsys, argv, *needles):
    """Run the CLI; assert exit 2 and exactly one line on stderr containing every needle."""
    rc = main(argv)
    cap = capsys.readouterr()
    lines = cap.err.strip().splitlines()
    assert rc == 2, (rc, cap.err, cap.out)
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in cap.err, cap.err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_invalid_utf8_is_named(tmp_path, capsys):
    f = tmp_path / "bad.json"
    f.write_bytes(b'{"schema": "reactccl.pattern/1", "name": "\xff\xfe"}')
    with pytest.raises(PatternError, match=r"not valid UTF-8: byte 0xff at offset 42"):
        load(f)
    for cmd in ("verify", "show"):
        _cli_error(capsys, ["pattern", cmd, str(f)], "not valid UTF-8", "offset 42")


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a":' * 5000 + "1" + "}" * 5000])
def test_deep_nesting_is_named(tmp_path, capsys, text):
    with pytest.raises(PatternError, match="nested deeper than the parser allows"):
        loads(text)
    f = tmp_path / "deep.json"
    f.write_text(text)
    _cli_error(capsys, ["pattern", "verify", str(f)], "nested deeper")


@pytest.mark.parametrize("where,patch", [
    ("num_ranks", lambda d: d.update(num_ranks=2**63)),
    ("root", lambda d: d.update(root=2**64)),
    ("chunks[0].id", lambda d: d["chunks"][0].update(id=-2**70)),
    ("chunks[1].graph", lambda d: d["chunks"][1].update(graph=2**63)),
    ("chunks[0].size", lambda d: d["chunks"][0].update(size=10**400)),
    ("flows[2].step", lambda d: d["flows"][2].update(step=2**63)),
    ("flows[0].src", lambda d: d["flows"][0].update(src=2**63 + 1)),
    ("flows[1].dst", lambda d: d["flows"][1].update(dst=-2**63 - 1)),
    ("flows[3].chunks[0]", lambda d: d["flows"][3].update(chunks=[2**100])),
])
def test_huge_integers_are_named(tmp_path, capsys, where, patch):
    d = _doc()
    patch(d)
    text = json.dumps(d)
    with pytest.raises(PatternError, match="^" + re.escape(where) + ": .*out of range"):
        loads(text)
    f = tmp_path / "big.json"
    f.write_text(text)
    _cli_error(capsys, ["pattern", "verify", str(f)], where, "out of range")


def test_step_near_2_56_is_refused_and_near_2_31_keeps_dependencies():
    p = generate("rabenseifner", 8)
    ptr, dep = p.dependencies()
    assert len(dep) == 120
    with pytest.raises(PatternError, match=r"flows\[0\]\.step: must be <= 2147483647 .*got 72057594037927936"):
        p.replace(step=p.step + (1 << 56))
    d = to_dict(p)
    d["flows"][5]["step"] = 1 << 56
    with pytest.raises(PatternError, match=r"flows\[5\]\.step: 72057594037927936 is out of range -2147483647\.\.2147483647"):
        loads(json.dumps(d))
    # the largest allowed steps: the (position, step) key would overflow int64; the dense
    # numbering gives exactly the same dependency graph
    for q in (p.replace(step=p.step + MAX_INDEX - int(p.step.max())),
              p.replace(step=p.step * (MAX_INDEX // int(p.step.max())))):
        ptr2, dep2 = q.dependencies()
        assert np.array_equal(ptr, ptr2) and np.array_equal(dep, dep2)
        with pytest.raises(PatternError, match="degrees: 1 graph\\(s\\) x .* steps x 8 ranks need .* GiB"):
            q.degrees()


def test_dev_zero_and_oversized_files_are_refused_before_parsing(tmp_path, capsys):
    with pytest.raises(PatternError, match="/dev/zero: is a device, not a regular file"):   # before reading it
        load("/dev/zero", max_bytes=1 << 20)
    _cli_error(capsys, ["pattern", "verify", "/dev/zero"], "/dev/zero: is a device, not a regular file")
    sparse = tmp_path / "huge.json"
    with open(sparse, "wb") as fh:
        fh.truncate((256 << 20) + 1)          # sparse: refused from its size, nothing is read
    _cli_error(capsys, ["pattern", "show", str(sparse)], "268435457 bytes is larger than the 256 MiB")


def test_verify_failure_stays_exit_1_and_load_errors_exit_2(tmp_path, capsys):
    f = tmp_path / "p.json"
    d = _doc()
    d["flows"] = d["flows"][:-1]
    f.write_text(json.dumps(d))
    assert main(["pattern", "verify", str(f)]) == 1
    assert capsys.readouterr().out.startswith("FAIL")
    f.write_text(json.dumps(_doc(collective="broadcast")))   # structurally wrong: no root
    _cli_error(capsys, ["pattern", "verify", str(f)], "root: broadcast needs a root")


def test_show_and_verify_with_steps_near_2_31(tmp_path, capsys):
    p = generate("ring", 4)
    q = p.replace(step=p.step * (MAX_INDEX // int(p.step.max())))
    f = tmp_path / "sparse.json"
    f.write_text(json.dumps(to_dict(q)))
    assert main(["pattern", "verify", str(f)]) == 0
    assert "24 flows, 6 steps;" in capsys.readouterr().out   # a file's steps are compacted on reading (issue 33)
    assert main(["pattern", "show", str(f), "--max-steps", str(10**9)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 + 6 and out[-1].startswith("  t5 ")

"""Pattern files everywhere a pattern goes (simulate --pattern, --save-pattern, demo --save-pattern)
and the pictures of one run (--plot, --timeline)."""

import json
from pathlib import Path

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.cli.main import main
from reactccl.netsim import run_simulation
from reactccl.pattern import save, verify
from reactccl.pattern.canon import canonical
from reactccl.pattern.files import load_pattern

DATA = Path(__file__).parent / "data"
PNG = b"\x89PNG\r\n\x1a\n"


def test_simulate_pattern_file_xml_same_as_the_pattern(capsys):
    f = DATA / "msccl_halving_doubling_4.xml"
    assert main(["simulate", "--pattern", str(f), "--topology", "star:hosts=4", "--size", "4MB", "--epochs", "2",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    direct = run_simulation(load_pattern(f), topology="star:hosts=4", size=4e6, epochs=2)
    assert doc["durations_s"] == pytest.approx(direct.durations.tolist())
    assert doc["ranks"] == 4 and doc["flows_per_epoch"] == 16
    # halving-doubling on a star: 2 MB (80 us + 2 us), 1 MB twice, 2 MB again
    assert doc["durations_s"][0] == pytest.approx(2 * (2e-6 + 160e-6) + 2 * (2e-6 + 80e-6))


def test_simulate_pattern_file_json_and_conflicts(tmp_path, capsys):
    j = tmp_path / "ring.json"
    save(generate("ring", 4), j)
    assert main(["simulate", "--pattern", str(j), "-t", "star:hosts=4", "-e", "1"]) == 0
    assert main(["simulate", "--pattern", str(j), "--algorithm", "ring", "-e", "1"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["simulate", "--pattern", str(j), "--ranks", "5", "-e", "1"]) == 2
    assert "has 4 ranks" in capsys.readouterr().err
    assert main(["simulate", "--pattern", str(tmp_path / "missing.json"), "-e", "1"]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_simulate_react_saves_the_last_pattern_and_pictures(tmp_path, capsys):
    x, j, plot, tl = tmp_path / "end.xml", tmp_path / "end.json", tmp_path / "ep.png", tmp_path / "tl.png"
    argv = ["simulate", "--algorithm", "nccl-tree", "-O", "slices=1", "--ranks", "8", "--topology", "star:hosts=16",
            "--size", "20MB",
            "--epochs", "30", "--background", "into:3:p=2", "--seed", "1", "--react", "--warmup", "12",
            "--param", "B=6"]
    assert main(argv + ["--save-pattern", str(j), "--plot", str(plot), "--timeline", str(tl)]) == 0
    err = capsys.readouterr().err
    assert f"wrote {j} (json)" in err and "(verified)" in err
    end = load_pattern(j)
    verify(end)
    orig = generate("nccl-tree", 8, slices=1)
    assert end.num_flows == orig.num_flows and not (np.array_equal(end.src, orig.src) and np.array_equal(end.dst, orig.dst))   # REACT moved ranks
    assert plot.read_bytes()[:8] == PNG and tl.read_bytes()[:8] == PNG
    assert main(argv + ["--save-pattern", str(x)]) == 0                                   # same run, as XML
    # the same transfers; the XML round trip may order reduces into one (rank, chunk) differently, which
    # moves a commutative reduce to an earlier step (canonical() keeps write order, so compare transfers)
    assert _transfers(load_pattern(x)) == _transfers(end)


def _transfers(p):
    return sorted((int(p.src[f]), int(p.dst[f]), int(p.op[f]), tuple(sorted(p.chunk_idx[p.chunk_ptr[f]:p.chunk_ptr[f + 1]].tolist())))
                  for f in range(p.num_flows))


def test_timeline_refuses_a_smear(tmp_path):
    from reactccl.experiments.run_plots import plot_timeline
    res = run_simulation("ring", 4, topology="star:hosts=4", epochs=1)
    with pytest.raises(ValueError, match="more than 5 bars"):
        plot_timeline(tmp_path / "t.png", res.traces[-1], max_flows=5)
    assert plot_timeline(tmp_path / "t.png", res.traces[-1]).read_bytes()[:8] == PNG


def test_demo_saves_reacts_pattern(tmp_path, capsys):
    out = tmp_path / "demo.xml"
    assert main(["demo", "--epochs", "20", "--warmup", "5", "--json", "--save-pattern", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["schema"]
    from reactccl.experiments.demo import DemoConfig
    cfg = DemoConfig()
    p = load_pattern(out)
    verify(p)
    base = generate(cfg.algorithm, cfg.ranks)
    assert p.num_ranks == cfg.ranks and np.allclose(p.chunk_size, base.chunk_size)

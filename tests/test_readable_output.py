"""Issue 35 item 6, one test per trap a new user met: timeline labels that fit their bars, an SP line
not hidden under k-SP, results not replaced by a run with other settings, plain columns when piped,
"did you mean", hints in CLI syntax, sizes in bits refused, perf's binary sizes, perf columns that
hold any number, decisions past the run's end, and --save-pattern saying what the file holds."""

import json
import re

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from reactccl.algorithms import generate  # noqa: E402
from reactccl.cli.main import main  # noqa: E402
from reactccl.experiments.perf import collective_of, make_row  # noqa: E402
from reactccl.experiments.perf_format import format_table  # noqa: E402
from reactccl.experiments.run_plots import plot_epochs, timeline_figure  # noqa: E402
from reactccl.experiments.sp_figures import STYLES, goodput_figure  # noqa: E402
from reactccl.experiments.sp_goodput import GoodputRun  # noqa: E402
from reactccl.pattern import PatternError  # noqa: E402
from reactccl.topology import TopologyError, parse_topology  # noqa: E402
from reactccl.topology.units import UnitError, parse_bytes  # noqa: E402
from reactccl.trace import EpochTrace  # noqa: E402


def _trace(p, seed=0):
    rng = np.random.default_rng(seed)
    start = np.sort(rng.uniform(0, 1e-3, p.num_flows))
    return EpochTrace(0, p, 20e6, start, start + rng.uniform(1e-6, 3e-4, p.num_flows), np.full(p.num_flows, 1e5),
                      1.3e-3)


@pytest.mark.parametrize("name, n, opts", [("ring", 8, {}), ("nccl-tree", 4, {"slices": 1}),
                                           ("nccl-tree", 16, {"slices": 8}), ("ring", 32, {})])
def test_timeline_labels_sit_inside_their_bars_and_never_overlap(name, n, opts):
    tr = _trace(generate(name, n, **opts))
    fig = timeline_figure(tr)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    ax = fig.axes[0]
    bars = [b.get_window_extent(r) for b in ax.patches]
    labels = [t.get_window_extent(r) for t in ax.texts]
    for lab in labels:
        assert any(b.x0 <= lab.x0 and lab.x1 <= b.x1 and b.y0 <= lab.y0 and lab.y1 <= b.y1 for b in bars)
    for i, a in enumerate(labels):
        assert not any(a.overlaps(b) for b in labels[i + 1:])
    assert labels or n > 8
    plt.close(fig)


def test_a_timeline_names_every_bar_that_has_room():
    p = generate("ring", 8)                     # 14 steps one after the other: bars a 14th of the width
    start = p.step * 1e-4
    fig = timeline_figure(EpochTrace(0, p, 20e6, start, start + 1e-4, np.full(p.num_flows, 1e5), 1.4e-3))
    assert sorted(t.get_text() for t in fig.axes[0].texts) == sorted(f"→{d}" for d in p.dst)
    plt.close(fig)


def test_sp_stays_visible_where_k_sp_equals_it():
    best = [{"family": f, "size": s, "goodput": g} for s in (1 << 16, 1 << 20)
            for f, g in (("SP", 5e11), ("k-SP", 5e11), ("Bucket", 3e11), ("Swing", 4e11), ("Trivance", 2e11))]
    run = GoodputRun([], best, {}, {"bound": 8e11, "fabric": "torus 8x8", "link_rate": 4e11, "hop_latency": 4e-7,
                                    "engine": "netsim"})
    fig = goodput_figure([run], "t")
    lines = {ln.get_label(): ln for ln in fig.axes[0].lines}
    sp, ksp = lines["SP"], lines["k-SP"]
    assert np.array_equal(sp.get_ydata(), ksp.get_ydata())          # the same points...
    assert sp.get_linewidth() > ksp.get_linewidth() and ksp.get_linestyle() == "--"    # ...both seen
    assert sp.get_markerfacecolor() == "none" and ksp.get_zorder() > sp.get_zorder()
    styles = {(ln.get_marker(), str(ln.get_linestyle())) for f, ln in lines.items() if f in STYLES}
    assert len(styles) == 5
    plt.close(fig)


def test_a_run_with_other_settings_does_not_replace_the_results(tmp_path, capsys):
    base = ["sp", "goodput", "sp-square", "--engine", "model", "--sizes", "64KiB,1MiB", "--out", str(tmp_path)]
    assert main(base + ["--sides", "4"]) == 0
    assert main(base + ["--sides", "4,6"]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["sp-square-enginemodel-sides4,6-sizes64KiB,1MiB.json",
                     "sp-square-enginemodel-sides4,6-sizes64KiB,1MiB.png",
                     "sp-square-enginemodel-sides4-sizes64KiB,1MiB.json",
                     "sp-square-enginemodel-sides4-sizes64KiB,1MiB.png"]
    assert "replacing" not in capsys.readouterr().out
    assert main(base + ["--sides", "4"]) == 0                         # the same settings: says so
    assert "(replacing the files of an earlier run with the same settings)" in capsys.readouterr().out


def test_tables_are_plain_columns_when_piped(capsys):
    assert main(["simulate", "-a", "nccl-tree", "-n", "8", "-t", "star:hosts=16", "-s", "20MB", "--epochs", "8",
                 "-b", "into:3:p=2", "--react", "--warmup", "2"]) == 0
    out = capsys.readouterr().out
    assert "│" not in out and "┃" not in out
    rows = [ln for ln in out.splitlines() if re.match(r"mean (algbw|busbw)\s{2,}", ln)]     # the table's rows
    assert len(rows) == 2
    for ln in rows:     # both runs' rates whole on the row: "3.855 GB/s (30.84 Gbps)" twice
        assert len(re.findall(r"\d+\.\d+ GB/s \(\d+\.\d+ Gbps\)", ln)) == 2


@pytest.mark.parametrize("typed", ["nccl-trees", "tree", "NCCL-tree", "nccl_tree"])
def test_algorithm_names_get_a_did_you_mean(typed):
    with pytest.raises(PatternError, match=rf"unknown algorithm '{typed}' \(did you mean 'nccl-tree'\?\)"):
        generate(typed, 8)


def test_topology_experiment_and_collective_names_get_a_did_you_mean(capsys):
    with pytest.raises(TopologyError, match=r"'fattree' \(did you mean 'fat-tree'\?\)"):
        parse_topology("fattree:k=4")
    assert main(["experiment", "sp_square"]) == 2
    assert "(did you mean 'sp-square'?)" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"allreduc \(did you mean 'all_reduce'"):
        collective_of("allreduc")


def test_hints_are_in_command_line_syntax():
    with pytest.raises(PatternError, match=r"give its shape, e.g. -O shape=4x3 on the command line"):
        generate("sp-allreduce", 12)
    with pytest.raises(PatternError, match=r"option shape 4x4: 16 nodes, not the 12 ranks \(e.g. -O shape=4x3\)"):
        generate("sp-allreduce", 12, shape=(4, 4))


@pytest.mark.parametrize("text, bytes_", [("20Mb", "2500000"), ("1Gb", "125000000"), ("3Kib", "384")])
def test_sizes_in_bits_are_refused_with_both_readings(text, bytes_):
    with pytest.raises(UnitError, match=rf"a lowercase b is bits.* or {bytes_} for"):
        parse_bytes(text, "--size")
    assert parse_bytes("20MB") == parse_bytes("20mb") == 20_000_000


def test_perf_refuses_decimal_units(capsys):
    assert main(["perf", "-b", "20 MB", "-e", "20 MB"]) == 2
    err = capsys.readouterr().err
    assert "perf's sizes are binary" in err and "20,971,520 bytes" in err and "20000000 for 20 MB" in err


def test_perf_rows_never_grow_past_their_columns():
    rows = [make_row("ring", "allreduce", 8, 8, 2, "float", None, (1e-5, 0), (1e-5, 0)),
            make_row("ring", "allreduce", 8, 2 ** 41, 2 ** 39, "float", None, (12345.6, 12345678), (1e4, None)),
            make_row("ring", "allreduce", 8, 2 ** 30, 2 ** 28, "float", None, (float("nan"), 0), (0.0, 3))]
    lines = format_table(rows).splitlines()
    head = next(ln for ln in lines if ln.startswith("#") and "size" in ln and "count" in ln)
    body = [ln for ln in lines if not ln.startswith("#")]
    assert len(body) == 3 and {len(ln) for ln in body} == {len(head)}


class _Late:
    kind, epoch, effective_epoch = "transform", 95, 101


def test_a_decision_past_the_runs_end_is_neither_applied_nor_drawn(tmp_path, capsys, monkeypatch):
    assert main(["demo", "--epochs", "10", "--warmup", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "for epoch 11: transform, never applied (the run ended with epoch 9)" in out
    assert "runs from epoch 11" not in out and "kept" not in out
    drawn = []
    monkeypatch.setattr(matplotlib.axes.Axes, "axvline", lambda self, x=0, **kw: drawn.append(x))
    plot_epochs(tmp_path / "e.png", [("REACT", np.ones(100))], [_Late()])
    assert drawn == []


def test_simulate_json_says_whether_a_decision_was_applied(capsys):
    assert main(["simulate", "-a", "nccl-tree", "-n", "8", "-t", "star:hosts=16", "-s", "20MB", "--epochs", "7",
                 "-b", "into:3:p=2", "--react", "--param", "B=3", "--warmup", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(d["effective_epoch"], d["applied"]) for d in doc["decisions"]] == [(8, False)]


def test_save_pattern_says_what_pattern_verify_will_say(tmp_path, capsys):
    f = tmp_path / "rd9.xml"
    assert main(["simulate", "-a", "recursive-doubling", "-n", "9", "-t", "star:hosts=9", "-s", "1MB", "-e", "2",
                 "--save-pattern", str(f)]) == 0
    wrote = capsys.readouterr().err
    assert main(["pattern", "verify", str(f)]) == 0
    verified = capsys.readouterr().out
    steps = int(re.search(r"(\d+) steps", verified).group(1))
    assert steps == 3 and f"steps={steps})" in wrote            # the run's pattern numbered 4 steps
    assert "read back it has 3 steps where the run's pattern numbered 4" in wrote

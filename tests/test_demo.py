"""``reactccl demo``: REACT beats the baseline on the demo scenario; its views and JSON."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from reactccl.cli.demo_cmd import show
from reactccl.cli.main import main
from reactccl.experiments.demo import DemoConfig, demo_scenario, run_demo


@pytest.fixture(scope="module")
def demo():
    return run_demo(DemoConfig(epochs=60, warmup=30))


def test_demo_scenario():
    sc, rank = demo_scenario(DemoConfig())
    assert rank == 3  # NCCL 8-rank double tree: the root's only child in tree 1
    assert sc.flows == ((8, 3), (8, 3)) and sc.jobs[0].placement == tuple(range(8))
    with pytest.raises(ValueError, match="needs 9"):
        demo_scenario(DemoConfig(topology="star:hosts=8"))
    with pytest.raises(ValueError, match="rank: expected 0..7"):
        demo_scenario(DemoConfig(rank=8))


def test_react_beats_the_baseline(demo):
    g = demo.gains()
    assert g["mean_time"] > 5.0          # >5% shorter mean epoch after the warm-up
    assert g["mean_algbw"] > 5.0
    assert demo.react.changes[0] >= 1
    # the baseline never changes its pattern and the congested rank leaves its interior position
    assert demo.baseline.changes[0] == 0
    moved = demo.before_after()["moved"]
    assert any(3 in m["ranks"] or m["position"] == 3 for m in moved)


def test_demo_json_and_view(demo):
    doc = json.loads(json.dumps(demo.to_json()))
    assert doc["schema"] == "reactccl.demo/1" and doc["congested_rank"] == 3
    assert set(doc["metrics"]) == {"baseline", "react"}
    assert len(doc["epoch_times"]["react"]) == 60
    assert doc["patterns"]["before"]["tree_parents"]["0"] == [-1, 2, 4, 2, 0, 6, 4, 6]
    console = Console(record=True, width=220)
    show(demo, console)
    text = console.export_text()
    for part in ("Pattern before and after", "decision log", "mean algbw", "p95 epoch time"):
        assert part in text


def test_demo_command_json(capsys):
    assert main(["demo", "--epochs", "20", "--warmup", "5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["scenario"]["epochs"] == 20
    assert main(["demo", "--size", "20 parsecs"]) == 2

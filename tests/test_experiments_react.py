"""Experiments with REACT in the loop: tiny ``--quick`` sweeps write the JSON and PNG with the
right fields; multi-job arms; the ``experiment`` command."""

from __future__ import annotations

import dataclasses
import json

import pytest

from reactccl.cli.main import main
from reactccl.experiments import EXPERIMENTS, SweepConfig, experiment_table, run_arm, run_experiment
from reactccl.experiments.report import SCHEMA

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _tiny(name, tmp_path, **kw):
    return run_experiment(name, quick=True, jobs=1, out=tmp_path, scenarios=1, progress=False, **kw)


def test_quick_fig5a_writes_json_and_png(tmp_path):
    doc = _tiny("fig5a", tmp_path, epochs=20, warmup=5)
    path = tmp_path / "fig5a-epochs20-quick-scenarios1-warmup5.json"       # named by its settings
    assert json.loads(path.read_text())["experiment"] == "fig5a"
    assert (tmp_path / "fig5a-epochs20-quick-scenarios1-warmup5.png").read_bytes()[:8] == PNG_MAGIC
    assert doc["files"] == {"json": str(path), "png": str(path.with_suffix(".png")), "replaced": []}
    assert doc["schema"] == SCHEMA and doc["metric"] == "improvement"
    assert doc["config"] | {"jobs": 1} == doc["config"]
    assert doc["config"]["scenario_count"] == 2 == len(doc["scenarios"])  # quick: x in {1, 4}, p = 2
    assert [r["setting"] for r in doc["rows"]] == [{"x": 1, "p": 2}, {"x": 4, "p": 2}]
    for row in doc["rows"]:
        assert row["arm"] == "react" and row["paper"] == "up to 60-95% (mean 35%)"
        imp = row["improvement"]
        assert set(imp) == {"mean", "min", "max", "median", "n", "values"} and imp["n"] == 1
        assert row["baseline_algbw"] > 0 and row["arm_algbw"] > 0
    sc = doc["scenarios"][0]
    assert set(sc["arms"]) == {"baseline", "react"}
    assert len(sc["arms"]["react"]["epoch_times"]) == 20
    base = sc["arms"]["baseline"]["jobs"][0]["mean_algbw"]
    react = sc["arms"]["react"]["jobs"][0]["mean_algbw"]
    assert sc["improvement"]["react"][0] == pytest.approx((react / base - 1) * 100)
    labels = [o["label"] for o in doc["overall"]]
    assert labels == ["p in {2,4}", "all settings"]
    assert experiment_table(doc).row_count == len(doc["rows"]) + len(doc["overall"])


def test_quick_fig6_two_jobs_both_with_react(tmp_path):
    doc = _tiny("fig6", tmp_path, epochs=14, warmup=4)
    assert [(r["setting"]["shared"], r["job_name"]) for r in doc["rows"]] == [
        (s, j) for s in (0, 4, 8) for j in ("job 1 (tree)", "job 2 (ring)")]
    # with no shared host on a star the jobs never meet: REACT has nothing to fix and the
    # baseline's times are exactly those of a lone job
    no_share = doc["scenarios"][0]
    assert no_share["scenario"]["setting"] == {"shared": 0}
    assert len(no_share["arms"]["react"]["jobs"]) == 2
    sc = EXPERIMENTS["fig6"].build(SweepConfig.make(quick=True, scenarios=1, epochs=14, warmup=4))[0]
    alone = run_arm(dataclasses.replace(sc, jobs=sc.jobs[:1], arms=(("baseline", (False,)),)), (False,))
    together = [row[0] for row in no_share["arms"]["baseline"]["epoch_times"]]
    assert together == pytest.approx(alone.durations[:, 0].tolist(), rel=1e-12)


def test_quick_fig7_arms(tmp_path):
    doc = _tiny("fig7", tmp_path, epochs=12, warmup=4)
    assert {r["arm"] for r in doc["rows"]} == {"react-job1", "react-both"}
    sc = doc["scenarios"][0]
    assert sc["arms"]["react-job1"]["jobs"][1]["changes"] == 0  # job 2 keeps its pattern
    assert (tmp_path / "fig7-epochs12-quick-scenarios1-warmup4.png").exists()


def test_experiment_command(tmp_path, capsys):
    rc = main(["experiment", "fig8", "--quick", "--jobs", "2", "--scenarios", "2", "--epochs", "15",
               "--warmup", "5", "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "fig8" in out and "wrote" in out
    doc = json.loads((tmp_path / "fig8-epochs15-quick-scenarios2-warmup5.json").read_text())
    assert doc["rows"][0]["paper"] == "up to 20%"
    assert doc["config"]["jobs"] == 2 and len(doc["scenarios"]) == 2
    assert doc["rows"][0]["setting"] == {"rate_gbps": 30}
    assert main(["experiment", "nope"]) == 2

"""A sweep runs every (scenario, arm) as its own task and joins them: the same results as one
process running each scenario whole (arms are independent: each builds its network from the seed)."""

from __future__ import annotations

import dataclasses

import pytest

from reactccl.experiments.figures import SweepConfig, get_experiment
from reactccl.experiments.runner import combine_arms, run_scenario, run_scenario_arm
from reactccl.experiments.sweep import run_sweep


def _scenarios(n=3):
    cfg = SweepConfig.make(True, scenarios=1, epochs=8, warmup=2)
    return get_experiment("fig12").build(cfg)[:n]


def test_pool_of_arm_tasks_equals_serial_run():
    scen = _scenarios()
    serial = run_sweep(scen, jobs=1, progress=False)
    pool = run_sweep(scen, jobs=2, progress=False)
    assert [r["scenario"] for r in pool] == [sc.to_json() for sc in scen]  # scenario order kept
    assert pool == serial  # epoch times, metrics, improvements: exactly


def test_arms_joined_by_hand_equal_run_scenario():
    sc = _scenarios(1)[0]
    assert len(sc.arms) == 2
    arms = [run_scenario_arm(sc, a) for a in range(len(sc.arms))]
    assert [a["name"] for a in arms] == [n for n, _ in sc.arms]
    whole = run_scenario(sc)
    assert combine_arms(sc, arms) == whole
    base, react = (a["jobs"][0]["mean_algbw"] for a in arms)
    assert whole["improvement"][sc.arms[1][0]][0] == pytest.approx((react / base - 1) * 100)


def test_bad_arm_index_and_mismatched_arms_are_named():
    sc = _scenarios(1)[0]
    with pytest.raises(IndexError, match="arm 2: the scenario has 2 arms"):
        run_scenario_arm(sc, 2)
    arm0 = run_scenario_arm(dataclasses.replace(sc, epochs=3, warmup=0), 0)
    with pytest.raises(ValueError, match="combine_arms: got arms"):
        combine_arms(sc, [arm0])

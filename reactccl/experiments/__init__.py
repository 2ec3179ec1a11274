"""Reproductions of REACT's simulation experiments (§7.3, C.2, C.3) and the ``reactccl demo`` scenario.

Layers: :mod:`.scenario` (seeded scenario generators), :mod:`.runner` (baseline and REACT arms on one
simulated network, several jobs each with its own controller), :mod:`.metrics` (algbw, improvement),
:mod:`.sweep` (process-pool sweeps, aggregation), :mod:`.figures` (the paper's figures as sweeps),
:mod:`.report` (JSON, PNG, tables), :mod:`.demo` (the README's demo).
"""

from .figures import EXPERIMENTS, Experiment, SweepConfig, get_experiment
from .metrics import epoch_metrics, improvement, summarize
from .report import experiment_table, plot_experiment, run_experiment
from .runner import ArmDriver, ArmRun, run_arm, run_scenario
from .scenario import PAPER, JobSpec, Scenario, random_pairs_scenario, scenario_seed
from .sweep import aggregate, run_sweep

__all__ = [
    "EXPERIMENTS", "PAPER", "ArmDriver", "ArmRun", "Experiment", "JobSpec", "Scenario",
    "SweepConfig", "aggregate", "epoch_metrics", "experiment_table", "get_experiment", "improvement",
    "plot_experiment", "random_pairs_scenario", "run_arm", "run_experiment", "run_scenario", "run_sweep",
    "scenario_seed", "summarize",
]

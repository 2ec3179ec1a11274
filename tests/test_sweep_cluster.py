"""Sweeps on a Dask cluster give the process pool's results for the same seeds (needs reactccl[cluster])."""

from __future__ import annotations

import pytest

from reactccl.experiments.figures import SweepConfig, get_experiment
from reactccl.experiments.sweep import run_sweep

distributed = pytest.importorskip("distributed")


@pytest.mark.slow
def test_dask_local_cluster_matches_the_process_pool():
    cfg = SweepConfig.make(True, scenarios=2, epochs=8, warmup=2)
    scen = get_experiment("fig12").build(cfg)[:3]
    pool = run_sweep(scen, jobs=2, progress=False)
    dask = run_sweep(scen, progress=False, cluster="auto")
    assert [r["scenario"] for r in dask] == [r["scenario"] for r in pool]
    assert dask == pool  # epoch times, metrics and improvements, exactly


def test_cluster_without_dask_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_dask(name, *a, **k):
        if name == "distributed":
            raise ImportError(name)
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    scen = get_experiment("fig12").build(SweepConfig.make(True, scenarios=1, epochs=2, warmup=0))[:1]
    with pytest.raises(ValueError, match=r"pip install 'reactccl\[cluster\]'"):
        run_sweep(scen, progress=False, cluster="auto")

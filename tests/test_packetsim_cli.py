"""--engine packet in the CLI and the experiments: options, the reduced sweep, missing ns-3 (no ns-3 run)."""

from __future__ import annotations

import pytest

from reactccl.cli.main import main
from reactccl.experiments.figures import SweepConfig, get_experiment
from reactccl.experiments.engines import PACKET_SWEEP, reduced_scenarios
from reactccl.experiments.runner import make_network
from reactccl.packetsim import native
from reactccl.topology import star


def test_reduced_fig12_sweep_is_x_1_4_p_2_4_one_scenario_each():
    scen = reduced_scenarios("fig12", size=2e6)
    assert sorted(s.setting for s in scen) == sorted(
        (("x", x), ("p", p)) for x in (1, 4) for p in (2, 4))
    assert all(s.epochs == PACKET_SWEEP["epochs"] and s.warmup == PACKET_SWEEP["warmup"] for s in scen)
    assert all(j.message_bytes == 2e6 for s in scen for j in s.jobs)
    # the same scenarios as the fluid sweep's at those settings (same seeds, placements, external flows)
    cfg = SweepConfig.make(False, 1, PACKET_SWEEP["epochs"], PACKET_SWEEP["warmup"])
    full = {s.setting: s for s in get_experiment("fig12").build(cfg)}
    for s in scen:
        assert s.seed == full[s.setting].seed and s.flows == full[s.setting].flows


def test_unknown_engine_is_named():
    with pytest.raises(ValueError, match="engine 'ns2': unknown; known: fluid, packet"):
        make_network("ns2", star(4))


@pytest.mark.parametrize("transport", ["default", "dctcp"])
def test_transport_without_packet_engine_is_refused(capsys, transport):
    # dctcp (packet's default) used to pass silently: the fluid engine has no transport
    assert main(["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-e", "1", "--transport", transport]) == 2
    assert capsys.readouterr().err == (f"error: --transport: only used with --engine packet (given: {transport}); "
                                       "add --engine packet or leave it out\n")


@pytest.mark.parametrize("replicas", ["1", "2"])
def test_replicas_without_packet_engine_is_refused(capsys, replicas):
    # an explicit --replicas 1 used to pass silently (1 was the default, so "not given")
    assert main(["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-e", "1", "--replicas", replicas]) == 2
    assert capsys.readouterr().err == (f"error: --replicas: an integer >= 1, only used with --engine packet "
                                       f"(got {replicas})\n")


def test_simulate_without_replicas_runs(capsys):
    assert main(["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-e", "1"]) == 0


def test_experiment_size_needs_packet_engine(capsys):
    assert main(["experiment", "fig12", "--size", "2MB", "--out", "/tmp/unused-reactccl"]) == 2
    assert "--size: only used with --engine packet" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=4", "-e", "1", "--engine", "packet"],
    ["demo", "--engine", "packet", "--epochs", "2", "--warmup", "0", "--no-progress"],
])
def test_missing_ns3_is_a_clear_error(monkeypatch, capsys, argv):
    monkeypatch.setattr(native, "_loaded", None)
    monkeypatch.setattr(native, "available", lambda: False)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "pip install 'reactccl[ns3]'" in captured.err + captured.out

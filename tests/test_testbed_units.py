"""Unit tests for the testbed's pure parts (no root needed): units, names, state file, env, CLI."""

import json

import pytest

from reactccl.cli.main import build_parser
from reactccl.testbed import TestbedError, parse_rate, parse_size
from reactccl.testbed.launcher import rank_env
from reactccl.testbed.state import TestbedState, check_prefix, load_state, new_prefix
from reactccl.testbed.testbed import Testbed


@pytest.mark.parametrize("text,bps", [("200mbit", 200_000_000), ("1.5gbit", 1_500_000_000),
                                      ("64kbit", 64_000), ("100000bit", 100_000), ("  10Mbit ", 10**7),
                                      (5e6, 5_000_000)])
def test_parse_rate(text, bps):
    assert parse_rate(text) == bps


@pytest.mark.parametrize("bad", ["200mbps", "fast", "", "-5mbit", "1kbit"])
def test_parse_rate_rejects(bad):
    with pytest.raises(ValueError, match="rate"):
        parse_rate(bad)


def test_parse_size():
    assert parse_size("256kb") == 262144
    assert parse_size("1mb") == 1048576
    assert parse_size(4000) == 4000
    for bad in ("256kbit", "12", "lots"):
        with pytest.raises(ValueError, match="size"):
            parse_size(bad)


def test_prefixes():
    p = new_prefix()
    assert check_prefix(p) == p and p.startswith("rcl") and len(p) == 8
    for bad in ("A1", "1abc", "a", "abc-def", "a" * 13):
        with pytest.raises(TestbedError, match="prefix"):
            check_prefix(bad)


def test_state_names_and_addresses():
    s = TestbedState(prefix="tst", hosts=3, rate_bps=10**8, queue_bytes=262144, cc="reno")
    assert [s.host_ns(r) for r in range(3)] == ["tst-h0", "tst-h1", "tst-h2"]
    assert [s.host_addr(r) for r in range(3)] == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]
    assert s.switch_ns == "tst-sw" and s.external_ns(4) == "tst-x4"
    assert s.external_addr(0) == "10.77.128.1"
    with pytest.raises(TestbedError, match="rank 3 out of range"):
        s.host_ns(3)


def test_state_roundtrip_and_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv("REACTCCL_TESTBED_DIR", str(tmp_path))
    with pytest.raises(TestbedError, match="no testbed is up"):
        load_state()
    a = Testbed(hosts=2, rate="50mbit", prefix="tsta").state
    a.save()
    assert json.loads((tmp_path / "tsta.json").read_text())["rate_bps"] == 50_000_000
    assert load_state() == a
    Testbed(hosts=5, prefix="tstb").state.save()
    with pytest.raises(TestbedError, match="several testbeds"):
        load_state()
    assert load_state("tstb").hosts == 5
    with pytest.raises(TestbedError, match="no testbed with prefix 'tstc'"):
        load_state("tstc")


def test_bad_constructor_arguments():
    with pytest.raises(TestbedError, match="hosts=0"):
        Testbed(hosts=0)
    with pytest.raises(TestbedError, match="cc='cubicx'"):
        Testbed(hosts=2, cc="cubicx")
    with pytest.raises(ValueError, match="rate"):
        Testbed(hosts=2, rate="200mbps")


def test_rank_env_is_torchrun_like():
    tb = Testbed(hosts=4, prefix="tstenv")
    env = rank_env(tb, 2, 29511)
    assert env["RANK"] == "2" and env["WORLD_SIZE"] == "4" and env["LOCAL_RANK"] == "0"
    assert env["MASTER_ADDR"] == "10.77.0.1" and env["MASTER_PORT"] == "29511"
    assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"] == "rcl0"


def test_cli_parses_testbed_commands():
    p = build_parser()
    a = p.parse_args(["testbed", "up", "--hosts", "8", "--rate", "200mbit", "--prefix", "abc"])
    assert (a.hosts, a.rate, a.prefix, a.cc) == (8, "200mbit", "abc", "reno")
    a = p.parse_args(["testbed", "congest", "--into", "3", "--flows", "2", "--duration", "5"])
    assert (a.into, a.flows, a.duration, a.stop) == (3, 2, 5.0, False)
    a = p.parse_args(["testbed", "run", "--timeout", "9", "--", "python", "-c", "print(1)"])
    assert a.cmd[-3:] == ["python", "-c", "print(1)"] and a.timeout == 9.0


@pytest.mark.parametrize("kw, words", [
    (dict(hosts=(1,)), "hosts"), (dict(flows=(65,)), "flows"), (dict(modes=("nope",)), "modes"),
    (dict(epochs=0), "epochs"), (dict(skip=60), "skip"), (dict(mbytes=0.0), "mbytes"),
    (dict(algorithm="nosuch"), "unknown"), (dict(algorithm="ring-allgather"), "allreduce"),
    (dict(victim=5, hosts=(4, 8)), "victim")])
def test_experiment_config_is_checked_before_anything_is_built(kw, words):
    from reactccl.testbed.experiment import ExperimentConfig
    from reactccl.testbed.netns import TestbedConfigError
    with pytest.raises(TestbedConfigError, match=words):
        ExperimentConfig(**kw).check()
    ExperimentConfig().check()  # the defaults are fine


@pytest.mark.parametrize("param, words", [("nosuch=1", "not a REACT parameter"), ("estimator=bogus", "estimator")])
def test_experiment_cli_checks_react_params_before_anything_is_built(param, words, capsys):
    # `reactccl testbed experiment --param` is refused (exit 2, named) before a testbed goes up
    from reactccl.cli.main import main
    assert main(["testbed", "experiment", "--hosts", "4", "--flows", "2", "--param", param]) == 2
    assert words in capsys.readouterr().err


def test_stale_state_means_a_dead_owner_of_an_unfinished_or_transient_testbed(tmp_path, monkeypatch):
    import os
    import subprocess
    import sys

    from reactccl.testbed.state import process_token, same_process
    monkeypatch.setenv("REACTCCL_TESTBED_DIR", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_token = process_token(dead.pid)
    dead.wait()
    me = os.getpid()
    assert same_process(me, process_token(me)) and not same_process(dead.pid, dead_token or "1")
    s = Testbed(hosts=2, prefix="tststale").state
    s.owner, s.owner_token = dead.pid, dead_token or "1"
    assert s.stale()                                       # half-built, its `up` is gone
    s.complete = True
    assert not s.stale()                                   # a finished `testbed up`: kept
    s.transient = True
    assert s.stale()                                       # a `with Testbed` block whose process died
    s.owner, s.owner_token = me, process_token(me)
    assert not s.stale()                                   # ... still alive
    s.ranks, s.ranks_owner = [[me, process_token(me)]], [dead.pid, dead_token or "1"]
    assert s.orphan_ranks() == [me]                        # a killed launcher's live rank
    s.save()
    old = {k: v for k, v in json.loads(s.path.read_text()).items()
           if k not in ("owner", "owner_token", "complete", "transient", "ranks", "ranks_owner")}
    s.path.write_text(json.dumps(old))                     # a file from before ownership was recorded
    assert load_state("tststale").complete and not load_state("tststale").stale()


def test_rank_env_with_ranks_per_host_is_torchrun_nproc_per_node():
    # torchrun --nnodes 3 --nproc-per-node 2: rank 3 is local rank 1 of node 1
    tb = Testbed(hosts=3, prefix="tstenv")
    env = rank_env(tb, 3, 29511, per_host=2)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("3", "6", "1", "2")
    assert env["GROUP_RANK"] == env["NODE_RANK"] == "1" and env["MASTER_ADDR"] == "10.77.0.1"
    a = build_parser().parse_args(["testbed", "run", "--ranks-per-host", "2", "--", "true"])
    assert a.ranks_per_host == 2


@pytest.mark.parametrize("bad", [0, 65, 1.5, True])
def test_launch_refuses_a_bad_ranks_per_host_before_starting_anything(bad):
    from reactccl.testbed.launcher import launch
    from reactccl.testbed.netns import TestbedConfigError
    with pytest.raises(TestbedConfigError, match="ranks per host"):
        launch(None, ["true"], per_host=bad)


def test_experiment_on_servers_picks_the_busiest_host_link_and_one_nic_per_host():
    import numpy as np

    from reactccl.algorithms import generate
    from reactccl.testbed.experiment import ExperimentConfig, default_victim, job_pattern
    from reactccl.testbed.worker import host_in_fraction, in_fraction
    cfg = ExperimentConfig(hosts=(4,), ranks_per_host=2)
    assert cfg.pattern_options() == {"nics": 1}
    assert ExperimentConfig(hosts=(4,)).pattern_options() == {}
    assert ExperimentConfig(hosts=(4,), ranks_per_host=2, algorithm="rabenseifner").pattern_options() == {}
    p, host = job_pattern("nccl-tree", 4, 2, {"nics": 1})
    assert p.name.startswith("nccl-tree(servers=4,gpus=2,nics=1,channels=2") and host.tolist() == [0, 0, 1, 1, 2, 2,
                                                                                                   3, 3]
    # the tree over 4 servers is the 4-rank double binary tree: servers 1 and 2 are inner nodes
    # (2.0 of the message from other hosts), 0 and 3 receive 1.0; busiest, lowest: host 1
    assert host_in_fraction(p, host) == [1.0, 2.0, 2.0, 1.0] and default_victim("nccl-tree", 4, 2, {"nics": 1}) == 1
    # one ring over 8 ranks: each server's first GPU receives 2(N-1)/N = 1.75 from the previous server
    ring, host = job_pattern("ring", 4, 2, {"nics": 1})
    assert host_in_fraction(ring, host) == [1.75] * 4
    flat = generate("nccl-tree", 4)        # one rank per host: every flow crosses a host link
    assert host_in_fraction(flat, np.arange(4)) == in_fraction(flat)
    for bad in (dict(ranks_per_host=0), dict(ranks_per_host=65), dict(options=[1])):
        with pytest.raises(TestbedError, match="ranks_per_host|options"):
            ExperimentConfig(**bad).check()


def test_summary_of_a_servers_run_counts_host_links():
    from reactccl.testbed.experiment import format_table, summarize
    run = {"hosts": 4, "flows": 2, "victim": 1, "ranks_per_host": 2,
           "in_fraction": [1.0, 0.5, 2.0, 0.5, 2.0, 0.5, 1.0, 0.5],
           "host_in_fraction": [1.0, 2.0, 2.0, 1.0],
           "modes": {"baseline": {"epoch_times": [2.0] * 4}, "flat": {"epoch_times": [3.0] * 4},
                     "react": {"epoch_times": [2.0, 2.0, 1.0, 1.0], "changes": 1, "change_epochs": [2],
                               "change_in_fraction": [[1.0] * 8], "change_host_in_fraction": [[2.0, 1.0, 2.0, 1.0]],
                               "in_fraction": [1.0] * 8, "host_in_fraction": [2.0, 1.0, 2.0, 1.0]}}}
    row = summarize({"config": {"skip": 0}, "runs": [run]})[0]
    assert (row["victim_in_before"], row["victim_in_after"], row["victim_in_measured"]) == (2.0, 1.0, 1.5)
    assert row["speedup_mean"] == pytest.approx(2.0 / 1.5) and row["ranks_per_host"] == 2
    text = format_table([row])
    assert " 4x2  2 |" in text and "2.00 -> 1.50" in text and "1.348" not in text   # no paper row for servers
    assert "all_reduce      flat (mean s)" in text and "        -     3.000 |" in text

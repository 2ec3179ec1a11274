"""``job:k=K:rate=R`` degrades: cables drawn from the job's own paths (REACT §7.3.4 gray failures
that surely meet the job)."""

import numpy as np
import pytest

from reactccl.traffic.background import BackgroundError, job_cables, job_degrade, parse_degrade
from reactccl.topology import parse_topology


def test_job_cables_are_those_on_the_jobs_paths():
    topo = parse_topology("star:hosts=6")
    # a star: the job's cables are its hosts' own cables, nothing of hosts 2..5
    cab = job_cables(topo, [0, 1])
    assert len(cab) == 2
    links = set(cab.reshape(-1).tolist())
    for s, d in ((0, 1), (1, 0)):
        for path in topo.shortest_paths(s, d):
            assert set(np.asarray(path).tolist()) <= links


def test_job_degrade_always_hits_the_job():
    topo = parse_topology("fat-tree:k=4")
    hosts = [0, 5, 9, 14]
    used = set()
    for s in hosts:
        for d in hosts:
            if s != d:
                for path in topo.shortest_paths(s, d):
                    used.update(np.asarray(path).tolist())
    for seed in range(10):
        d = job_degrade(topo, hosts, 1, 30e9, seed=seed)
        assert len(d) == 2 and set(d.values()) == {30e9}          # one cable, both directions
        assert set(d) & used
    assert parse_degrade("job:k=1:rate=30G", topo, seed=3, hosts=hosts) == job_degrade(topo, hosts, 1, 30e9, 3)


def test_job_degrade_errors_are_named():
    topo = parse_topology("star:hosts=6")
    with pytest.raises(BackgroundError, match="needs its hosts"):
        parse_degrade("job:k=1:rate=30G", topo)
    with pytest.raises(BackgroundError, match="only 2 cables"):
        job_degrade(topo, [0, 1], 3, 30e9)
    with pytest.raises(BackgroundError, match="missing field 'rate'"):
        parse_degrade("job:k=1", topo, hosts=[0, 1])


def test_cli_degrade_job_draws_from_the_job_paths(capsys):
    import json

    from reactccl.cli.main import main
    argv = ["simulate", "-a", "nccl-tree", "-n", "8", "-t", "fat-tree:k=4", "-s", "2MB", "-e", "2",
            "--degrade", "job:k=1:rate=30G", "--seed", "3", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["degraded"]) == 2 and set(doc["degraded"].values()) == {30e9}   # one cable, both directions

"""``run_simulation`` and ``reactccl simulate``: summaries, JSON, errors naming the bad field."""

import json

import numpy as np
import pytest

from reactccl.cli.main import main
from reactccl.netsim import run_simulation

US = 1e-6


def test_run_simulation_ring_on_star_matches_alpha_beta():
    r = run_simulation("ring", 4, topology="star:hosts=6", size="1MB", epochs=3, seed=1)
    assert r.durations.tolist() == pytest.approx([132 * US] * 3, rel=1e-12)
    s = r.stats()
    assert s["p50_s"] == pytest.approx(132 * US) and s["algbw_Bps"] == pytest.approx(1e6 / 132e-6)
    assert s["busbw_Bps"] == pytest.approx(1e6 / 132e-6 * 1.5)
    assert len(r.slowest) == 5 and r.slowest[0]["fct"] == pytest.approx(22 * US)
    assert r.num_flows == 24 and r.placement.tolist() == [0, 1, 2, 3]


def test_run_simulation_background_degrade_and_seed():
    kw = dict(topology="fat-tree:k=4", size="2MB", epochs=4, background=["into:3:p=2", "pairs:x=2:p=1"],
              degrade=["random:k=1:rate=30G"], placement="random", seed=5)
    a, b = run_simulation("nccl-tree", 8, **kw), run_simulation("nccl-tree", 8, **kw)
    assert np.array_equal(a.durations, b.durations) and a.placement.tolist() == b.placement.tolist()
    assert len(a.background) == 4 and len(a.degraded) == 2
    clean = run_simulation("nccl-tree", 8, topology="fat-tree:k=4", size="2MB", epochs=4, placement="random",
                           seed=5)
    assert a.stats()["mean_s"] > clean.stats()["mean_s"]
    doc = a.to_dict()
    assert doc["schema"] == "reactccl.simulate/1" and len(doc["durations_s"]) == 4
    json.dumps(doc)


def test_cli_json(capsys):
    rc = main(["simulate", "-a", "ring", "-n", "4", "-t", "star:hosts=6", "-s", "1MB", "-e", "2", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stats"]["mean_s"] == pytest.approx(132e-6) and doc["epochs"] == 2 and doc["ranks"] == 4


def test_cli_human_summary(capsys):
    rc = main(["simulate", "--algorithm", "nccl-tree", "--ranks", "8", "--topology", "fat-tree:k=4",
               "--size", "20MB", "--epochs", "3", "--background", "into:3:p=2", "--background",
               "bulk:src=h15,dst=r1,bytes=5MB,period=2ms", "--degrade", "link=0:rate=30G", "--seed", "1"])
    out = capsys.readouterr().out
    assert rc == 0
    for text in ("p50", "p95", "mean algbw", "busbw", "GB/s", "Gbps", "slowest flows", "bulk: h15->h1",
                 "degraded:", "30 Gbps", "2 long-lived flows"):
        assert text in out


@pytest.mark.parametrize("argv, msg", [
    (["-t", "fat-tree:k=3"], "even k"),
    (["-t", "mesh:k=3"], "unknown name 'mesh'"),
    (["-s", "20XB"], "size: unknown unit"),
    (["-b", "into:3:q=1"], "unknown field 'q'"),
    (["-d", "random:k=2"], "missing field 'rate'"),
    (["--placement", "0,0,1,2"], "more than one rank"),
    (["-n", "40"], "40 ranks need 40 hosts"),
    (["-a", "nope"], "unknown algorithm 'nope'"),
])
def test_cli_errors_name_the_field(capsys, argv, msg):
    base = {"-a": "ring", "-n": "4", "-t": "fat-tree:k=4", "-e": "1"}
    for k, v in zip(argv[::2], argv[1::2]):
        base[k] = v
    args = ["simulate"] + [x for kv in base.items() for x in kv]
    assert main(args) == 2
    assert msg in capsys.readouterr().err

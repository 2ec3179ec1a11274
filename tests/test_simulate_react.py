"""``reactccl simulate --react`` and ``run_simulation(controller=...)``."""

import json

import numpy as np

from reactccl.cli.main import main
from reactccl.netsim import run_simulation
from reactccl.tuner import ReactController, ReactParams


class _SwapOnce:
    """A tiny controller: runs the pattern relabelled (ranks 0 and 1 swapped) from epoch 2 on."""

    def __init__(self, pattern):
        self.p, self.q = pattern, pattern.relabel([1, 0] + list(range(2, pattern.num_ranks)))
        self.seen = []

    def pattern_for_epoch(self, e):
        return self.q if e >= 2 else self.p

    def observe(self, trace):
        self.seen.append(trace.epoch)


def test_controller_protocol_drives_the_simulation():
    res = run_simulation("ring", 4, topology="star:hosts=4", size=4e6, epochs=4, controller=_SwapOnce)
    assert res.controller.seen == [0, 1, 2, 3]
    assert res.pattern_changes == 1
    # a relabelled ring on a symmetric star takes exactly as long: 6 steps of (2 µs + 1 MB at 100 Gbps)
    np.testing.assert_allclose(res.durations, 6 * (2e-6 + 1e6 * 8 / 100e9), rtol=1e-9)


def test_react_beats_static_tree_on_congested_star():
    # the REACT paper's tree: one slice per tree, by name (the default slices as NCCL does)
    common = dict(topology="star:hosts=16", size=20e6, epochs=40, background=["into:3:p=2"], seed=1,
                  options={"slices": 1})
    base = run_simulation("nccl-tree", 8, **common)
    react = run_simulation("nccl-tree", 8, controller=lambda p: ReactController(p, ReactParams(seed=1)), **common)
    assert len(react.controller.decisions) >= 1
    # after REACT's first decision takes effect (epoch 11) the tree avoids rank 3's congested downlink
    assert react.durations[15:].mean() < 0.9 * base.durations[15:].mean()


def test_cli_react_json(capsys):
    rc = main(["simulate", "--algorithm", "nccl-tree", "-O", "slices=1", "--ranks", "8", "--topology", "star:hosts=16",
               "--size", "20MB", "--epochs", "30", "--background", "into:3:p=2", "--seed", "1", "--react",
               "--warmup", "12", "--param", "B=6", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "reactccl.simulate-react/1"
    assert doc["params"]["B"] == 6 and doc["params"]["seed"] == 1
    assert len(doc["decisions"]) >= 1
    base, react = doc["baseline"]["durations_s"], doc["react"]["durations_s"]
    assert np.mean(react[12:]) < np.mean(base[12:])


def test_cli_react_bad_param(capsys):
    rc = main(["simulate", "--algorithm", "ring", "--ranks", "4", "--topology", "star:hosts=4",
               "--epochs", "2", "--react", "--param", "bogus=1"])
    assert rc == 2
    assert "bogus: not a REACT parameter" in capsys.readouterr().err

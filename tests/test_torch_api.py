"""Public PyTorch API: ReactAllReduce, the DDP hook, and examples/train_ddp.py under torchrun."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import reactccl.torch as rt  # noqa: E402
from reactccl.algorithms import generate  # noqa: E402
from reactccl.runtime.local import free_port, run_local  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]


class SwapFirstTwo:
    """Deterministic controller: every 4th trace, swap the ranks at positions 0 and 1."""

    def __init__(self, pattern):
        self.pattern, self.count = pattern, 0

    def observe(self, trace):
        self.count += 1
        if self.count % 4:
            return None
        perm = np.arange(self.pattern.num_ranks)
        perm[[0, 1]] = perm[[1, 0]]
        self.pattern = self.pattern.relabel(perm)
        return self.pattern


def _train(model, x, y, steps):
    opt = torch.optim.SGD(model.parameters(), lr=0.02)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _net():
    torch.manual_seed(0)
    # ~273k parameters (1.1 MB): more than DDP's 1 MB first bucket, so two buckets per step
    return torch.nn.Sequential(torch.nn.Linear(16, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 4))


def _child_ddp(rank, world):
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(64, 16, generator=g)
    y = x[:, :4] * 2 + 1
    # several buckets per step, so one REACT epoch spans several calls
    react = DDP(_net(), bucket_cap_mb=0.25)
    state = rt.enable_react(react, algorithm="nccl-tree", controller=SwapFirstTwo, every=2, delay=1, timeout=30)
    losses = _train(react, x, y, 14)
    state.close()
    plain = DDP(_net(), bucket_cap_mb=0.25)
    _train(plain, x, y, 14)
    mine = torch.cat([p.detach().reshape(-1) for p in react.parameters()])
    ref = torch.cat([p.detach().reshape(-1) for p in plain.parameters()])
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    # the basic API: in place, returns its argument; rejects non-AllReduce patterns
    ar = rt.ReactAllReduce(algorithm="ring", react=False, average=True)
    t = torch.full((5,), float(rank))
    same_obj = ar(t) is t
    try:
        rt.ReactAllReduce(algorithm="ring-allgather", react=False)
        wrong = "no error"
    except ValueError as e:
        wrong = str(e)
    return dict(losses=losses, identical=all(torch.equal(e, every[0]) for e in every),
                max_vs_ddp=float((mine - ref).abs().max()), changes=[a.epoch for a in state.changes],
                epochs=state.epoch, calls=state.rc.calls, avg=t.tolist(), same_obj=same_obj, wrong=wrong)


def test_ddp_hook_trains_like_ddp_with_swaps_and_identical_params():
    res = run_local(_child_ddp, 3, timeout=240)
    for r in res:
        assert r["losses"][-1] < 0.8 * r["losses"][0], r["losses"]
        assert r["identical"]
        assert r["max_vs_ddp"] < 1e-4            # same training as DDP's own AllReduce, up to float order
        # 14 steps = 14 epochs; rounds of 2 epochs, a swap every 4 traces (rounds 1, 3, 5):
        # applied at (k+1)*2 + 1 = 5, 9, 13
        assert r["changes"] == [5, 9, 13] and r["epochs"] == 14
        assert r["calls"] > r["epochs"]            # several buckets per epoch
        assert r["avg"] == [1.0] * 5 and r["same_obj"]
        assert "needs an allreduce pattern" in r["wrong"]


@pytest.mark.slow
def test_example_train_ddp_under_torchrun():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), str(ROOT / "examples" / "train_ddp.py"), "--steps", "40",
           "--timeout", "30"]
    from reactccl.torch import default_controller  # noqa: F401
    try:
        default_controller(generate("nccl-tree", 2))
    except RuntimeError:
        cmd.append("--no-react")                   # no REACT controller yet: run the static pattern
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    losses = re.findall(r"rank (\d): loss ([\d.]+) -> ([\d.]+)", out)
    assert len(losses) == 2, out[-3000:]
    assert all(float(b) < 0.8 * float(a) for _, a, b in losses)
    assert "params identical on all 2 ranks: True" in out


def _child_no_close(rank, world, epochs, drop):
    ar = rt.ReactAllReduce(algorithm="nccl-tree", controller=SwapFirstTwo, delay=1, timeout=20)
    x = torch.ones(1000)
    for _ in range(epochs):
        ar(x)
    tuner = ar.tuner
    if drop:                      # garbage collection runs close() through the finalizer
        del ar
        import gc
        gc.collect()
        return float(x[0]), tuner._thread.is_alive()
    # no close(): run_local calls dist.destroy_process_group() right after this returns,
    # while this rank's tuner thread may be in the control-plane round of the last epoch
    return float(x[0]), None


@pytest.mark.parametrize("drop", [False, True], ids=["destroy-group", "garbage-collected"])
def test_no_close_shuts_down_quietly(capfd, drop):
    # 9 epochs, delay 1: the controller swaps after its 4th and 8th trace, so rounds are
    # still running when the ranks finish
    res = run_local(_child_no_close, 2, 9, drop, timeout=120)
    err = capfd.readouterr().err
    assert [r[0] for r in res] == [2.0 ** 9] * 2
    if drop:
        assert [r[1] for r in res] == [False, False]         # the tuner thread was stopped
    assert "REACT tuning stopped" not in err and "control plane failed" not in err, err[-2000:]


def test_default_controller_takes_params_as_a_dict():
    # the testbed worker gets ReactAllReduce's options as JSON, so params may be a dict of fields
    from reactccl.torch import default_controller
    from reactccl.tuner import ReactParams
    ctrl = default_controller(generate("nccl-tree", 4), {"estimator": "closed", "B": 8})
    assert ctrl.params == ReactParams(estimator="closed", B=8)
    with pytest.raises(TypeError, match="no_such_field"):
        default_controller(generate("nccl-tree", 4), {"no_such_field": 1})


def test_react_allreduce_checks_dict_params_on_every_rank():
    # a bad params dict must fail on each rank at construction, not on the leader alone
    from reactccl.runtime.local import run_local
    res = run_local(_bad_params_child, 2, timeout=60)
    assert all("no_such_field" in r for r in res)


def _bad_params_child(rank, world):
    from reactccl.torch import ReactAllReduce
    try:
        ReactAllReduce(algorithm="ring", params={"no_such_field": 1}, leader=0)
    except TypeError as e:
        return str(e)
    return "constructed"

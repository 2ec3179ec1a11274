"""Train a small model with DistributedDataParallel, gradients all-reduced by REACT.

    torchrun --nproc_per_node 4 examples/train_ddp.py                 # CPU, Gloo
    torchrun --nproc_per_node 4 examples/train_ddp.py --no-react      # static pattern (baseline)
    torchrun --nproc_per_node 4 examples/train_ddp.py --algorithm ring --steps 200

The one line that enables REACT is ``reactccl.torch.enable_react(model, ...)``.
Each rank trains on its own shard of a synthetic regression task (a fixed
random linear map plus noise); at the end every rank prints its first and last
loss, and rank 0 prints whether the parameters are identical on all ranks (they
must be: DDP applies the same averaged gradients everywhere).
"""

from __future__ import annotations

import argparse
import hashlib
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import reactccl.torch as rt
from reactccl.runtime.listen import init_process_group


def make_data(rank: int, n: int = 256, d_in: int = 32, d_out: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s shard: x ~ N(0, 1), y = x W + 0.01 noise with one W for all ranks."""
    w = torch.randn(d_in, d_out, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1 + rank)
    x = torch.randn(n, d_in, generator=g)
    return x, x @ w + 0.01 * torch.randn(n, d_out, generator=g)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--algorithm", default="nccl-tree", help="AllReduce pattern generator (reactccl pattern list)")
    ap.add_argument("--no-react", dest="react", action="store_false", help="keep the static pattern")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds any wait may take")
    args = ap.parse_args(argv)
    # checked before the process group exists, so every rank stops with one line, not a traceback
    from reactccl.runtime.argcheck import allreduce_algorithm_error
    if args.steps < 1:
        ap.error(f"--steps: expected an integer >= 1, got {args.steps}")
    if not args.timeout > 0:
        ap.error(f"--timeout: expected seconds > 0, got {args.timeout}")
    if allreduce_algorithm_error(args.algorithm):
        ap.error(allreduce_algorithm_error(args.algorithm))

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    # torchrun's env:// rendezvous; without torchrun's agent the store binds MASTER_ADDR only
    init_process_group(backend, timeout=args.timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if backend == "nccl" else "cpu")
    torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts them)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(device)
    model = DDP(net, device_ids=[device.index] if backend == "nccl" else None)
    state = rt.enable_react(model, algorithm=args.algorithm, react=args.react, timeout=args.timeout)

    x, y = (t.to(device) for t in make_data(rank))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    for _ in range(args.steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    state.close()

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()
    every = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(every, flat)
    same = all(torch.equal(e, every[0]) for e in every)
    digest = hashlib.sha1(flat.numpy().tobytes()).hexdigest()[:12]
    print(f"rank {rank}: loss {losses[0]:.4f} -> {losses[-1]:.4f}; params {digest}; "
          f"pattern changes {len(state.changes)}", flush=True)
    if rank == 0:
        print(f"params identical on all {world} ranks: {same}", flush=True)
        decisions = getattr(state.tuner.controller, "decisions", None) if state.tuner else None
        if decisions is not None:
            print("REACT decisions (leader):\n" + decisions.report(), flush=True)
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""DDP training-step time: plain DDP vs our hook with REACT off vs REACT on, side by side in one run.

    .venv/bin/python bench/bench_ddp.py                       # 4 Gloo ranks, 765 k parameters, 3 buckets
    .venv/bin/python bench/bench_ddp.py --steps 40 --rounds 3 --algorithm ring
    .venv/bin/python bench/bench_ddp.py --before dcc496e          # and that revision's hook, side by side

Four copies of one small MLP (same initial weights) are wrapped in DDP on the same group:
``plain`` (DDP's own AllReduce hook), ``react-off`` (``enable_react(model, react=False)``:
our asynchronous hook, static pattern), ``sync-off`` (the same with the hook as it was before:
the collective inside the hook, a completed future) and ``react-on`` (``enable_react(model)``: REACT's
tuner and default controller, no congestion; ``react-on/every=1`` the same with a control-plane
round after every epoch instead of every ``DEFAULT_EVERY``). Every step each model runs one training step
(forward, backward, SGD update) in an order shuffled per step (``bench/_stats.rep_order``), after a barrier; the step's time is the
slowest rank's. It prints the median step time of each and its ratio to ``plain`` as
``median [95% CI]`` (per step: the model's step over ``plain``'s step of the same round and step
index; the distribution-free interval of the median, ``bench/_stats.py``), judges the issue's
target (``react-on`` <= 1.05x ``plain``) on that interval, and prints the CPU time all ranks spent
per step, plus the pattern changes REACT made. ``--before REV`` adds
``react-off@REV`` and ``react-on@REV``: the same two with the ``reactccl`` package of git revision
REV (exported beside today's, see ``bench/_old.py``), and the pattern changes ``react-on@REV`` made.

The machine's load moves single figures a lot (see ``bench_runtime.py``); read the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import reactccl.torch as rt
from _old import export_old, load_old
from _stats import format_ci, median_ci, paired_ratios, rep_order, verdict
from reactccl.runtime.local import run_local
from reactccl.trace import format_time


def _net(width: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(),
                               torch.nn.Linear(width, 8))


def _sync_hook(state, bucket):
    """The hook as it was before it became asynchronous: the collective runs inside the hook."""
    buf = bucket.buffer()
    state.run(buf, end_epoch=bucket.is_last())
    buf.div_(state.world)
    fut = torch.futures.Future()
    fut.set_result(buf)
    return fut


def _child(rank: int, world: int, steps: int, rounds: int, width: int, bucket_mb: float, algorithm: str,
           batch: int, old: tuple | None = None) -> dict:
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(batch, 64, generator=g)
    y = torch.randn(batch, 8, generator=g)
    models = {"plain": DDP(_net(width), bucket_cap_mb=bucket_mb)}
    models["react-off"] = DDP(_net(width), bucket_cap_mb=bucket_mb)
    off = rt.enable_react(models["react-off"], algorithm=algorithm, react=False, timeout=120)
    models["sync-off"] = DDP(_net(width), bucket_cap_mb=bucket_mb)
    sync = rt.ReactAllReduce(models["sync-off"].process_group, algorithm=algorithm, react=False, timeout=120)
    models["sync-off"].register_comm_hook(sync, _sync_hook)
    models["react-on"] = DDP(_net(width), bucket_cap_mb=bucket_mb)
    on = rt.enable_react(models["react-on"], algorithm=algorithm, timeout=120)
    models["react-on/every=1"] = DDP(_net(width), bucket_cap_mb=bucket_mb)   # a control round every epoch
    on1 = rt.enable_react(models["react-on/every=1"], algorithm=algorithm, timeout=120, every=1)
    olds = []
    if old is not None:
        old_enable, = load_old(old[1], "torch.enable_react")
        for name, kw in (("react-off", dict(react=False)), ("react-on", {})):
            models[f"{name}@{old[0]}"] = DDP(_net(width), bucket_cap_mb=bucket_mb)
            olds.append(old_enable(models[f"{name}@{old[0]}"], algorithm=algorithm, timeout=120, **kw))
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3) for k, m in models.items()}
    names = list(models)

    def step(k: str) -> None:
        opts[k].zero_grad()
        torch.nn.functional.mse_loss(models[k](x), y).backward()
        opts[k].step()

    for k in names:       # warm-up: buckets rebuilt after the first step, agreement checks, schedules
        for _ in range(2):
            step(k)
    per_round = {k: [] for k in names}
    cpu = {k: [] for k in names}
    for rnd in range(rounds):
        times = {k: [] for k in names}
        for s in range(steps):
            for k in rep_order(names, rnd, s):
                dist.barrier()
                c, t = time.process_time(), time.perf_counter()
                step(k)
                mine = torch.tensor([time.perf_counter() - t, time.process_time() - c], dtype=torch.float64)
                every = [torch.empty_like(mine) for _ in range(world)]
                dist.all_gather(every, mine)
                every = torch.stack(every)
                times[k].append(float(every[:, 0].max()))
                cpu[k].append(float(every[:, 1].sum()))
        for k in names:
            per_round[k].append(times[k])
    buckets = off.rc.calls / max(off.epoch, 1)      # hook calls per backward pass
    params = sum(p.numel() for p in models["plain"].parameters())
    mine = torch.cat([p.detach().reshape(-1) for p in models["react-on"].parameters()])
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    res = dict(times=per_round, cpu={k: statistics.median(v) for k, v in cpu.items()}, changes=len(on.changes),
               changes_every1=len(on1.changes),
               changes_before=len(olds[1].changes) if olds and hasattr(olds[1], "changes") else None, epochs=on.epoch, buckets=buckets, params=params,
               identical=all(torch.equal(e, every[0]) for e in every),
               log=on.tuner.controller.decisions.report() if rank == 0 and on.tuner and on.tuner.controller else "")
    for state in (on, on1, off, sync, *olds):
        state.close()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="DDP step time: plain vs REACT hook off/on")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per model per round")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (the ratios' CI is over all steps of all rounds)")
    ap.add_argument("--width", type=int, default=600, help="hidden width (3 hidden layers)")
    ap.add_argument("--bucket-mb", type=float, default=1.0, help="DDP bucket_cap_mb")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--algorithm", default="nccl-tree")
    ap.add_argument("--before", metavar="REV", help="also time the hook of git revision REV (off and on)")
    args = ap.parse_args(argv)
    old = None
    if args.before:
        tmp = tempfile.TemporaryDirectory(prefix="bench_ddp_")
        try:
            old = (args.before, export_old(args.before, tmp.name))
        except (RuntimeError, OSError) as e:
            print(f"bench_ddp: --before {args.before}: {e}", file=sys.stderr)
            return 2
    res = run_local(_child, args.ranks, args.steps, args.rounds, args.width, args.bucket_mb, args.algorithm,
                    args.batch, old, timeout=3600, pg_timeout=300)
    r0 = res[0]
    per_round = r0["times"]
    print(f"DDP training step on {args.ranks} Gloo ranks: {r0['params']:,} parameters, {r0['buckets']:g} buckets, "
          f"batch {args.batch}, {args.algorithm}; {args.rounds} round(s) x {args.steps} steps, slowest rank")
    w = max(map(len, per_round))
    print(f"{'model':>{w}} {'step':>10} {'ratio to plain [95% CI]':>24} {'CPU/step':>10} {'CPU ratio':>9}")
    cis = {}
    for k, v in per_round.items():
        med = statistics.median(t for r in v for t in r)
        cis[k] = median_ci(paired_ratios(v, per_round["plain"]))
        print(f"{k:>{w}} {format_time(med):>10} {format_ci(*cis[k], digits=3):>24} {format_time(r0['cpu'][k]):>10} "
              f"{r0['cpu'][k] / r0['cpu']['plain']:>8.3f}x")
    print(f"target react-on <= 1.05x plain: {format_ci(*cis['react-on'], digits=3)}, "
          f"{verdict(cis['react-on'][1], cis['react-on'][2], 1.05)} (judged on the 95% CI)")
    print("CPU/step: process CPU of every thread of all ranks together, median (less moved by other jobs than "
          "the step time)")
    before = "" if r0["changes_before"] is None else f" ({r0['changes_before']} at {args.before})"
    print(f"REACT on: {r0['changes']} pattern change(s){before}, {r0['changes_every1']} with every=1, in "
          f"{r0['epochs']} epochs; parameters identical on "
          f"all ranks: {all(r['identical'] for r in res)}")
    if r0["log"]:
        print("REACT on, rank 0's decision log:\n" + r0["log"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

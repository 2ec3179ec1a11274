"""One rank of the testbed experiment: timed AllReduce epochs in interleaved segments.

Started once per rank by :meth:`Testbed.run` (G per host with ``ranks_per_host``; or by real
``torchrun``; the standard ``RANK``/``WORLD_SIZE``/``MASTER_*`` variables are read, and
``LOCAL_*``/``GROUP_RANK`` checked by the server grouping)::

    python -m reactccl.testbed.worker --modes baseline,react,nccl \\
        --rounds 2 --epochs 30 --mbytes 4 --out result.json

The ranks first learn which of them share a host (:func:`reactccl.runtime.grouping.learn_servers`;
a namespace of the emulated cluster is a host) and build the pattern on it: for ``ring`` and
``nccl-tree`` with several ranks per host, NCCL's hierarchical pattern (``--options`` adds generator
options, e.g. ``{"nics": 1}`` for a host with one link).

Modes, each run as ``rounds`` segments of ``epochs`` epochs in ABAB order
(baseline, react, nccl, baseline, react, nccl, ...) so slow drifts of the
machine hit every mode alike:

* ``baseline``: :class:`reactccl.torch.ReactAllReduce` with ``react=False``
  (RCollective running the static pattern);
* ``react``: the same with ``react=True`` (RTuner + REACT controller); its state
  (learned pattern, history) carries over between its segments;
* ``nccl``: ``dist.all_reduce`` of the backend (Gloo here), the paper's NCCL curve;
* ``flat``: the static pattern built as if every rank were its own server (``servers="flat"``:
  the hierarchy ignored), to compare with the hierarchical ``baseline`` on several ranks per host.

An epoch is one AllReduce of ``mbytes`` MB of float32, started after a barrier;
its time is ``max(exit) - min(enter)`` over ranks (CLOCK_MONOTONIC, shared by all
namespaces of one machine). Rank 0 writes the JSON result (see :func:`main`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from ..runtime.argcheck import allreduce_algorithm_error
from ..runtime.grouping import learn_servers, server_pattern
from ..runtime.listen import init_process_group

__all__ = ["main"]

MODES = ("baseline", "react", "nccl", "flat")


def _make_ops(modes, algorithm, react_options, grouping, options):
    import torch.distributed as dist  # optional dependency: only the ranks need torch

    from ..torch import ReactAllReduce  # needs torch

    ops = {}
    for mode in modes:
        if mode == "baseline":
            ops[mode] = ReactAllReduce(None, algorithm=algorithm, react=False, servers=grouping, **options)
        elif mode == "react":
            kw = {"control_ifname": os.environ.get("REACTCCL_CONTROL_IFNAME"), **options, **react_options}
            ops[mode] = ReactAllReduce(None, algorithm=algorithm, react=True, servers=grouping, **kw)
        elif mode == "nccl":
            ops[mode] = dist.all_reduce
        elif mode == "flat":
            flat = {k: v for k, v in options.items() if k != "nics"}    # no servers, no NICs
            ops[mode] = ReactAllReduce(None, algorithm=algorithm, react=False, servers="flat", **flat)
        else:
            raise ValueError(f"mode {mode!r}: choose from {', '.join(MODES)}")
    return ops


def in_fraction(pattern) -> list[float]:
    """Per rank, the fraction of the message it receives over all flows of ``pattern``
    (sum of its incoming flows' chunk fractions), shape ``(N,)``."""
    return np.bincount(pattern.dst, weights=pattern.flow_fraction, minlength=pattern.num_ranks).tolist()


def host_in_fraction(pattern, host_of_rank) -> list[float]:
    """Per host, the fraction of the message it receives from other hosts over all flows of
    ``pattern`` (what crosses its shaped downlink), shape ``(H,)``; ``host_of_rank`` shape ``(N,)``.
    With one rank per host this is :func:`in_fraction`."""
    host = np.asarray(host_of_rank, dtype=np.int64)
    inter = host[pattern.src] != host[pattern.dst]
    return np.bincount(host[pattern.dst][inter], weights=pattern.flow_fraction[inter],
                       minlength=int(host.max()) + 1).tolist()


def _inter(pattern, host_of_rank) -> int:
    """Flows of ``pattern`` between ranks on different hosts."""
    host = np.asarray(host_of_rank)
    return int((host[pattern.src] != host[pattern.dst]).sum())


def _check_args(ap: argparse.ArgumentParser, a: argparse.Namespace, modes: list[str]) -> None:
    if not modes or any(m not in MODES for m in modes):
        ap.error(f"--modes {a.modes!r}: choose from {', '.join(MODES)}")
    if allreduce_algorithm_error(a.algorithm):
        ap.error(allreduce_algorithm_error(a.algorithm))
    for flag, value in (("--epochs", a.epochs), ("--rounds", a.rounds)):
        if value < 1:
            ap.error(f"{flag}: expected an integer >= 1, got {value}")
    if not a.mbytes > 0 or not a.timeout > 0:
        ap.error(f"--mbytes and --timeout must be > 0, got {a.mbytes}, {a.timeout}")
    for flag, text in (("--react", a.react), ("--options", a.options)):
        try:
            if not isinstance(json.loads(text), dict):
                raise ValueError("not an object")
        except ValueError as e:
            ap.error(f"{flag}: expected a JSON object of keyword arguments ({e})")


def main(argv: list[str] | None = None) -> int:
    """Run the segments; rank 0 writes ``{"modes": {mode: {"epoch_times": [...], ...}}, ...}``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", default="baseline,react,nccl")
    ap.add_argument("--algorithm", default="nccl-tree")
    ap.add_argument("--mbytes", type=float, default=4.0, help="AllReduce message size in MB")
    ap.add_argument("--epochs", type=int, default=30, help="epochs per segment")
    ap.add_argument("--rounds", type=int, default=2, help="segments per mode (ABAB)")
    ap.add_argument("--react", default="{}", help="JSON keyword arguments for ReactAllReduce")
    ap.add_argument("--options", default="{}",
                    help='JSON generator options for the pattern of every mode, e.g. {"nics": 1}')
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds for any one collective")
    ap.add_argument("--out", required=True, help="JSON result file (written by rank 0)")
    a = ap.parse_args(argv)
    modes = [m for m in a.modes.split(",") if m]
    _check_args(ap, a, modes)  # before the process group: every rank stops with one line

    import torch  # optional dependency: only the ranks need torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    init_process_group("gloo", timeout=a.timeout)  # the store listens on MASTER_ADDR only
    rank, world = dist.get_rank(), dist.get_world_size()
    options = json.loads(a.options)
    grouping = learn_servers()                 # one namespace = one host (collective)
    initial = server_pattern(a.algorithm, world, grouping, **dict(options))
    host_of_rank = grouping.server_of_rank()
    ops = _make_ops(modes, a.algorithm, json.loads(a.react), grouping, options)
    numel = max(1, int(a.mbytes * 1e6) // 4)
    x = torch.empty(numel, dtype=torch.float32)
    expect = float(world * (world - 1) // 2)
    enter = {m: [] for m in modes}
    leave = {m: [] for m in modes}
    for _ in range(a.rounds):
        for m in modes:
            for _ in range(a.epochs):
                x.fill_(float(rank))
                dist.barrier()
                t0 = time.monotonic()
                ops[m](x)
                t1 = time.monotonic()
                enter[m].append(t0)
                leave[m].append(t1)
            if float(x[0]) != expect or float(x[-1]) != expect:
                raise RuntimeError(f"rank {rank}, mode {m}: wrong AllReduce result "
                                   f"{float(x[0])}, {float(x[-1])} (expected {expect})")
    from ..runtime.wire import all_gather_json  # needs torch
    gathered = all_gather_json({"enter": enter, "leave": leave})  # plain data, no pickle
    if rank == 0:
        result = {"world": world, "algorithm": a.algorithm, "message_bytes": numel * 4,
                  "pattern": initial.name, "servers": [list(x) for x in grouping.servers],
                  "grouping": grouping.describe(), "host_of_rank": host_of_rank.tolist(),
                  "in_fraction": in_fraction(initial), "host_in_fraction": host_in_fraction(initial, host_of_rank),
                  "in_degree": initial.degrees()[0].tolist(),
                  "epochs": a.epochs, "rounds": a.rounds, "order": modes, "modes": {}}
        for m in modes:
            starts = [min(g["enter"][m][e] for g in gathered) for e in range(len(enter[m]))]
            ends = [max(g["leave"][m][e] for g in gathered) for e in range(len(enter[m]))]
            entry = {"epoch_times": [b - s for s, b in zip(starts, ends, strict=True)], "start": starts}
            if m == "react":
                changes = [c for c in ops[m].changes if c.pattern is not None]
                entry["changes"] = len(changes)
                entry["change_epochs"] = [c.epoch for c in changes]
                entry["change_in_fraction"] = [in_fraction(c.pattern) for c in changes]
                entry["change_host_in_fraction"] = [host_in_fraction(c.pattern, host_of_rank) for c in changes]
                entry["in_fraction"] = in_fraction(ops[m].pattern)
                entry["host_in_fraction"] = host_in_fraction(ops[m].pattern, host_of_rank)
                entry["inter_host_flows"] = [_inter(c.pattern, host_of_rank) for c in changes]
                entry["in_degree"] = ops[m].pattern.degrees()[0].tolist()
                ctrl = getattr(ops[m].tuner, "controller", None)
                log = getattr(ctrl, "decisions", None)
                if log is not None:
                    entry["decisions"] = [d.to_dict() for d in log]
                    entry["report"] = log.report()
            result["modes"][m] = entry
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.replace(tmp, a.out)
    for m in modes:
        if m != "nccl":
            ops[m].close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

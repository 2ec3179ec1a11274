"""Offsets between the ranks' monotonic clocks, so flow times from different hosts compare.

A flow's start is taken on its sender and its end on its receiver. Processes
on one machine share CLOCK_MONOTONIC (network namespaces included), so the
offset is 0 when all ranks report the same host name and boot id. Otherwise
each rank measures its offset to rank 0 with Cristian's algorithm: a few
ping-pongs, keeping the one with the shortest round trip, whose error is at
most half that round trip.

Source: F. Cristian, "Probabilistic clock synchronization", Distributed
Computing 3(3), 1989.
"""

from __future__ import annotations

import socket
import time

import torch
import torch.distributed as dist

from .wire import all_gather_json

__all__ = ["clock_offset", "machine_id"]

_TAG = (1 << 20) - 7


def machine_id() -> str:
    """Host name plus the kernel's boot id (equal exactly when CLOCK_MONOTONIC is shared)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def clock_offset(group=None, rounds: int = 8) -> float:
    """Seconds to add to this rank's ``time.monotonic()`` to read rank 0's clock (collective).

    Every rank of ``group`` must call it. Returns 0.0 on all ranks when they
    share one machine; else rank 0 answers ``rounds`` pings from each other
    rank in turn (CPU tensors, so a Gloo group).
    """
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    ids = all_gather_json(machine_id(), group=group, max_bytes=4096)  # plain data, no pickle
    if len(set(map(str, ids))) == 1:
        return 0.0
    glob = [dist.get_global_rank(group, r) if group is not None else r for r in range(world)]
    buf = torch.zeros(1, dtype=torch.float64)
    if rank == 0:
        for r in range(1, world):
            for _ in range(rounds):
                dist.recv(buf, glob[r], group=group, tag=_TAG)
                buf[0] = time.monotonic()
                dist.send(buf, glob[r], group=group, tag=_TAG)
        return 0.0
    best_rtt, best = float("inf"), 0.0
    for _ in range(rounds):
        t0 = time.monotonic()
        dist.send(buf, glob[0], group=group, tag=_TAG)
        dist.recv(buf, glob[0], group=group, tag=_TAG)
        t1 = time.monotonic()
        if t1 - t0 < best_rtt:
            best_rtt, best = t1 - t0, float(buf[0]) + (t1 - t0) / 2 - t1
    return best

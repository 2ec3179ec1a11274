"""Timed bulk transfers between hosts of the emulated cluster (for tests and ``bench/``).

A transfer's time runs from the sender's clock before ``connect`` to the
receiver's clock at the last byte; both are CLOCK_MONOTONIC, which all network
namespaces share, so the difference is meaningful.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import netns
from .netns import TestbedError
from .traffic import SCRIPT as TRAFFIC_SCRIPT

if TYPE_CHECKING:
    from .testbed import Testbed

__all__ = ["Transfer", "measure_transfers"]

_MEASURE_PORT0 = 5301


@dataclass(frozen=True)
class Transfer:
    """One measured transfer: ``nbytes`` from rank ``src`` to rank ``dst`` in ``seconds``."""

    src: int
    dst: int
    nbytes: int
    seconds: float

    @property
    def bps(self) -> float:
        """Goodput in bit/s."""
        return 8.0 * self.nbytes / self.seconds


def measure_transfers(tb: "Testbed", pairs: Sequence[tuple[int, int]], nbytes: int,
                      timeout: float = 120.0) -> list[Transfer]:
    """Run one TCP transfer of ``nbytes`` per ``(src, dst)`` pair, all at once; time each.

    Args:
        pairs: (sender rank, receiver rank) pairs; a pair may not repeat.
        nbytes: bytes per transfer (> 0).
        timeout: seconds for the whole measurement.
    Returns:
        Transfers in the order of ``pairs``.
    Raises:
        TestbedError on a bad pair, a failed/late process, or a short transfer.
    """
    if nbytes <= 0 or not pairs:
        raise TestbedError(f"measure_transfers: need pairs and nbytes > 0 (got {len(pairs)}, {nbytes})")
    if len(set(pairs)) != len(pairs) or any(s == d for s, d in pairs):
        raise TestbedError(f"measure_transfers: pairs must be distinct with src != dst: {list(pairs)}")
    dsts = sorted({d for _, d in pairs})
    sinks, sources = {}, []
    try:
        for k, d in enumerate(dsts):
            count = sum(1 for _, dd in pairs if dd == d)
            sinks[d] = tb.start_sink(tb.host_ns(d), _MEASURE_PORT0 + k, timeout, count=count)
        for s, d in pairs:
            argv = [sys.executable, TRAFFIC_SCRIPT, "source", "--to", tb.host_addr(d),
                    "--port", str(_MEASURE_PORT0 + dsts.index(d)), "--bytes", str(nbytes)]
            sources.append(tb.popen(tb.host_ns(s), argv, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True))
        deadline = time.monotonic() + timeout
        src_out = [_communicate(p, deadline, f"sender rank {s}") for p, (s, _) in zip(sources, pairs)]
        sink_out = {d: _communicate(p, deadline, f"receiver rank {d}") for d, p in sinks.items()}
    finally:
        netns.kill_pids([p.pid for p in [*sinks.values(), *sources] if p.poll() is None])
    by_peer = {}
    for d, text in sink_out.items():
        for line in text.splitlines():
            rec = json.loads(line)
            by_peer[(rec["peer"], d)] = rec
    out = []
    for (s, d), text in zip(pairs, src_out):
        start = json.loads(text.strip().splitlines()[-1])["start"]
        rec = by_peer.get((tb.host_addr(s), d))
        if rec is None or rec["bytes"] != nbytes:
            raise TestbedError(f"transfer {s}->{d}: receiver saw {rec and rec['bytes']} of {nbytes} bytes")
        out.append(Transfer(s, d, nbytes, rec["last"] - start))
    return out


def _communicate(p: subprocess.Popen, deadline: float, what: str) -> str:
    try:
        out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{what}: no result before the timeout") from None
    if p.returncode != 0:
        raise TestbedError(f"{what}: exit {p.returncode}: {err.strip()}")
    return out

"""A torchrun-like launcher for the emulated cluster: one process per host namespace.

Each rank gets the environment torchrun would give a one-process-per-node job
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK=0``, ``LOCAL_WORLD_SIZE=1``,
``GROUP_RANK``/``NODE_RANK``, ``MASTER_ADDR`` = host 0's address, ``MASTER_PORT``)
plus ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME`` = the host link (without it
Gloo binds loopback and hangs), ``REACTCCL_TESTBED_PREFIX`` and, with a control
network, ``REACTCCL_CONTROL_IFNAME``. So the same
command runs unchanged under real ``torchrun`` across machines.

Like torchrun, when one rank fails the others are stopped; the launcher waits
with a timeout and returns the first failure's exit code. The ranks' pids (each the
leader of its own process group) and the launcher's are kept in the testbed's state
file while the job runs, so ranks of a launcher killed with ``kill -9`` are stopped by
the next ``run``, ``up`` or ``down``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .netns import TestbedConfigError, kill_groups
from .state import CONTROL_IFNAME, TestbedState, process_token

__all__ = ["Hosts", "RunResult", "launch", "rank_env"]

#: Exit code reported when the job ran past its timeout (as coreutils ``timeout``).
TIMEOUT_EXIT = 124


class Hosts(Protocol):
    """What the launcher needs of a testbed (:class:`reactccl.testbed.Testbed` has it): its state
    file (rank pids are recorded there), the number of hosts, each host's namespace and address,
    the host link's interface name, and a way to start a process inside a namespace."""

    state: TestbedState

    @property
    def hosts(self) -> int: ...

    @property
    def prefix(self) -> str: ...

    @property
    def ifname(self) -> str: ...

    def host_ns(self, rank: int) -> str: ...

    def host_addr(self, rank: int) -> str: ...

    def popen(self, ns: str, argv: Sequence[str], **kwargs) -> subprocess.Popen: ...


@dataclass
class RunResult:
    """Outcome of :func:`launch`.

    Attributes:
        returncode: 0 when every rank exited 0; else the first failing rank's code
            (negative = killed by that signal), or 124 on timeout.
        failed_rank: rank that failed first, or None.
        codes: exit code per rank (None if it had to be killed by the launcher).
        output: captured stdout+stderr per rank (empty strings when streamed).
        seconds: wall time of the job.
        timed_out: whether the timeout fired.
    """

    returncode: int
    failed_rank: int | None
    codes: list[int | None]
    output: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False


def rank_env(tb: Hosts, rank: int, master_port: int) -> dict[str, str]:
    """The torchrun-style variables for ``rank`` on testbed ``tb`` (plus
    ``REACTCCL_CONTROL_IFNAME`` when it has a control network)."""
    control = {"REACTCCL_CONTROL_IFNAME": CONTROL_IFNAME} if tb.state.control else {}
    return {**control,
        "RANK": str(rank), "WORLD_SIZE": str(tb.hosts),
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(rank), "NODE_RANK": str(rank),
        "MASTER_ADDR": tb.host_addr(0), "MASTER_PORT": str(master_port),
        "GLOO_SOCKET_IFNAME": tb.ifname, "NCCL_SOCKET_IFNAME": tb.ifname,
        "REACTCCL_TESTBED_PREFIX": tb.prefix,
    }


def _pump(stream, rank: int, sink: list[str], echo: bool) -> None:
    for line in stream:  # ends at EOF, i.e. when the rank's process group closed its output
        if echo:
            sys.stdout.write(f"[rank {rank}] {line}")
            sys.stdout.flush()
        else:
            sink.append(line)


def launch(tb: Hosts, cmd: Sequence[str], *, timeout: float = 600.0,
           env: Mapping[str, str] | None = None, master_port: int = 29500,
           stream: bool = True, grace: float = 5.0) -> RunResult:
    """Run ``cmd`` in every host namespace of ``tb`` and wait for all of them.

    Args:
        cmd: argv of the per-rank command (the same on every rank).
        timeout: seconds before every rank is killed (result code 124).
        env: extra environment for every rank (on top of ours and the rank variables).
        master_port: port of the rendezvous store on host 0.
        stream: echo output as ``[rank i] line``; otherwise collect it into ``output``.
        grace: seconds between SIGTERM and SIGKILL when stopping ranks.
    Raises:
        TestbedError when ``cmd`` is empty or the testbed is not up.
    """
    if not cmd:
        raise TestbedConfigError("testbed run: no command given (reactccl testbed run -- CMD ...)")
    if not timeout > 0:
        raise TestbedConfigError(f"timeout={timeout!r}: must be > 0 seconds")
    kill_groups(tb.state.orphan_ranks())  # ranks of an earlier launcher that was killed
    procs: list[subprocess.Popen] = []
    pumps: list[threading.Thread] = []
    outputs: list[list[str]] = [[] for _ in range(tb.hosts)]
    t0 = time.monotonic()
    try:
        for r in range(tb.hosts):
            penv = {**os.environ, **(env or {}), **rank_env(tb, r, master_port)}
            p = tb.popen(tb.host_ns(r), list(cmd), env=penv, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, errors="replace",
                         start_new_session=True)
            procs.append(p)
            _record(tb, procs)
            th = threading.Thread(target=_pump, args=(p.stdout, r, outputs[r], stream), daemon=True)
            th.start()
            pumps.append(th)
        failed, timed_out = _wait_all(procs, t0 + timeout)
    except BaseException:  # Ctrl-C or a failed start: leave nothing running
        _stop(procs, grace)
        _record(tb, [])
        raise
    if failed is not None or timed_out:
        _stop(procs, grace)
    for th in pumps:
        th.join(timeout=grace)
    _record(tb, [])
    codes = [p.poll() for p in procs]
    if timed_out:
        rc = TIMEOUT_EXIT
    elif failed is not None:
        rc = codes[failed] or 1
    else:
        rc = 0
    return RunResult(returncode=rc, failed_rank=failed, codes=codes,
                     output=["".join(o) for o in outputs], seconds=time.monotonic() - t0,
                     timed_out=timed_out)


def _record(tb: Hosts, procs: list[subprocess.Popen]) -> None:
    """Keep the running ranks (and this launcher) in the state file, if the testbed has one."""
    tb.state.ranks = [[p.pid, process_token(p.pid)] for p in procs]
    tb.state.ranks_owner = [os.getpid(), process_token(os.getpid())] if procs else []
    if tb.state.path.exists():
        tb.state.save()


def _wait_all(procs: list[subprocess.Popen], deadline: float) -> tuple[int | None, bool]:
    """Poll until all exit 0, one fails (its rank), or the deadline passes (timed_out=True)."""
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        bad = [r for r, c in enumerate(codes) if c not in (None, 0)]
        if bad:
            return bad[0], False
        if all(c == 0 for c in codes):
            return None, False
        time.sleep(0.05)
    return None, True


def _stop(procs: list[subprocess.Popen], grace: float) -> None:
    """SIGTERM, then after ``grace`` s SIGKILL, each rank's process group (groups we created)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            try:
                os.killpg(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)

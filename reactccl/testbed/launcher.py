"""A torchrun-like launcher for the emulated cluster: G processes (ranks) per host namespace.

Each rank gets the environment ``torchrun --nnodes H --nproc-per-node G`` would give it
(``RANK`` = host * G + local, ``WORLD_SIZE`` = H * G, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` = G,
``GROUP_RANK``/``NODE_RANK`` = host, ``MASTER_ADDR`` = host 0's address, ``MASTER_PORT``)
plus ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME`` = the host link (without it
Gloo binds loopback and hangs), ``REACTCCL_TESTBED_PREFIX`` and, with a control
network, ``REACTCCL_CONTROL_IFNAME``. So the same
command runs unchanged under real ``torchrun`` across machines.

With G > 1 the G ranks of a host share its namespace, so its one shaped link (a server's NIC) and
its address: Gloo connections between them go to a local address, which the kernel routes over
the namespace's loopback, unshaped (the NVLink of the emulated server), while traffic to other
hosts crosses the shaped link. The ranks learn this grouping themselves
(:func:`reactccl.runtime.grouping.learn_servers`: one network namespace = one host).

Like torchrun, when one rank fails the others are stopped; the launcher waits
with a timeout and returns the first failure's exit code. The ranks' pids (each the
leader of its own process group) and the launcher's are kept in the testbed's state
file while the job runs, so ranks of a launcher killed with ``kill -9`` are stopped by
the next ``run``, ``up`` or ``down``.
"""

from __future__ import annotations

import contextlib
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

__all__ = ["Hosts", "RunResult", "launch", "rank_env", "MAX_PER_HOST"]

#: Exit code reported when the job ran past its timeout (as coreutils ``timeout``).
TIMEOUT_EXIT = 124
#: The most ranks one host namespace runs (servers hold up to 8 GPUs; this leaves room, not 250 x 250).
MAX_PER_HOST = 64


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


def rank_env(tb: Hosts, rank: int, master_port: int, per_host: int = 1) -> dict[str, str]:
    """The torchrun-style variables for ``rank`` on testbed ``tb`` with ``per_host`` ranks in each
    host (rank ``r`` on host ``r // per_host``; plus ``REACTCCL_CONTROL_IFNAME`` when it has a
    control network)."""
    control = {"REACTCCL_CONTROL_IFNAME": CONTROL_IFNAME} if tb.state.control else {}
    host = rank // per_host
    return {**control,
        "RANK": str(rank), "WORLD_SIZE": str(tb.hosts * per_host),
        "LOCAL_RANK": str(rank % per_host), "LOCAL_WORLD_SIZE": str(per_host),
        "GROUP_RANK": str(host), "NODE_RANK": str(host),
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
           stream: bool = True, grace: float = 5.0, per_host: int = 1) -> RunResult:
    """Run ``cmd`` ``per_host`` times in every host namespace of ``tb`` (ranks host-major) and
    wait for all of them.

    Args:
        cmd: argv of the per-rank command (the same on every rank).
        timeout: seconds before every rank is killed (result code 124).
        env: extra environment for every rank (on top of ours and the rank variables).
        master_port: port of the rendezvous store on host 0.
        stream: echo output as ``[rank i] line``; otherwise collect it into ``output``.
        grace: seconds between SIGTERM and SIGKILL when stopping ranks.
        per_host: ranks per host namespace, G (1..64).
    Raises:
        TestbedError when ``cmd`` is empty or the testbed is not up; TestbedConfigError for a bad
        ``timeout`` or ``per_host``.
    """
    if not cmd:
        raise TestbedConfigError("testbed run: no command given (reactccl testbed run -- CMD ...)")
    if not timeout > 0:
        raise TestbedConfigError(f"timeout={timeout!r}: must be > 0 seconds")
    if isinstance(per_host, bool) or not isinstance(per_host, int) or not 1 <= per_host <= MAX_PER_HOST:
        raise TestbedConfigError(f"ranks per host {per_host!r}: need an integer in 1..{MAX_PER_HOST}")
    world = tb.hosts * per_host
    kill_groups(tb.state.orphan_ranks())  # ranks of an earlier launcher that was killed
    procs: list[subprocess.Popen] = []
    pumps: list[threading.Thread] = []
    outputs: list[list[str]] = [[] for _ in range(world)]
    t0 = time.monotonic()
    try:
        for r in range(world):
            penv = {**os.environ, **(env or {}), **rank_env(tb, r, master_port, per_host)}
            p = tb.popen(tb.host_ns(r // per_host), list(cmd), env=penv, stdout=subprocess.PIPE,
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
            with contextlib.suppress(ProcessLookupError, PermissionError):    # already gone
                os.killpg(p.pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)

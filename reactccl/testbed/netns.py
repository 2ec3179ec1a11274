"""Thin, checked wrappers around iproute2 for the emulated cluster.

Every command is run with an argument list (never a shell), a timeout, and its
stderr kept, so a failure raises :class:`TestbedError` naming the command and
what iproute2 said. Nothing here touches the root network namespace except
``ip netns add/del`` itself: links are created inside the namespaces
(``ip -n NS link add ... peer ... netns OTHER``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence

from ..errors import ReactcclError

__all__ = [
    "TestbedError", "TestbedConfigError", "netns_unavailable", "require_netns", "sh", "ip", "tc", "ns_sysctl",
    "list_namespaces", "namespace_pids", "kill_pids", "kill_groups", "delete_namespace",
]

#: Seconds any single iproute2/sysctl command may take before we give up.
COMMAND_TIMEOUT = 20.0


class TestbedError(ReactcclError, RuntimeError):
    """Setting up, using or tearing down the emulated cluster failed."""

    __test__ = False  # not a pytest test class despite the name


class TestbedConfigError(TestbedError, ValueError):
    """A bad argument (host count, prefix, flow count, timeout...): a TestbedError that is
    also a ValueError, so the CLI reports it as bad input (exit 2)."""

    __test__ = False


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be used here, or None when they can.

    Checks: running as root (uid 0), ``ip`` and ``tc`` from iproute2 on PATH.
    Used by the CLI for a clear message and by tests to skip.
    """
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return (f"iproute2 is missing ({', '.join(missing)} not on PATH); "
                "install it (Debian/Ubuntu: apt-get install iproute2)")
    if os.geteuid() != 0:
        return "network namespaces, veth links and tc need root; run as root (e.g. sudo)"
    return None


def require_netns() -> None:
    """Raise :class:`TestbedError` with the reason when namespaces are unavailable."""
    why = netns_unavailable()
    if why:
        raise TestbedError(why)


def sh(args: Sequence[str], *, check: bool = True, timeout: float = COMMAND_TIMEOUT,
       input: str | None = None) -> subprocess.CompletedProcess:
    """Run ``args`` (no shell), capture output; raise TestbedError on failure or timeout."""
    try:
        cp = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, input=input)
    except subprocess.TimeoutExpired as e:
        raise TestbedError(f"`{' '.join(args)}` did not finish within {timeout:g} s") from e
    except FileNotFoundError as e:
        raise TestbedError(f"`{args[0]}` not found: {e}") from e
    if check and cp.returncode != 0:
        raise TestbedError(f"`{' '.join(args)}` failed (exit {cp.returncode}): "
                           f"{(cp.stderr or cp.stdout).strip()}")
    return cp


def ip(ns: str | None, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``ip [-n ns] args...``."""
    return sh(["ip", *(["-n", ns] if ns else []), *args], check=check)


def tc(ns: str, *args: str) -> subprocess.CompletedProcess:
    """``tc -n ns args...``."""
    return sh(["tc", "-n", ns, *args])


def ns_sysctl(ns: str, settings: dict[str, str]) -> None:
    """Set sysctls inside namespace ``ns`` (one ``ip netns exec`` for all of them)."""
    if settings:
        sh(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
            *[f"{k}={v}" for k, v in settings.items()]])


def list_namespaces(prefix: str = "") -> list[str]:
    """Names of existing network namespaces starting with ``prefix`` (sorted)."""
    out = sh(["ip", "netns", "list"]).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(prefix))


def namespace_pids(ns: str) -> list[int]:
    """Process ids running inside namespace ``ns`` (``ip netns pids``)."""
    cp = sh(["ip", "netns", "pids", ns], check=False)
    return [int(tok) for tok in cp.stdout.split() if tok.isdigit()]


def kill_pids(pids: Sequence[int], grace: float = 2.0) -> None:
    """SIGTERM each pid, wait up to ``grace`` seconds, then SIGKILL the survivors.

    Only ever called with pids this package started (recorded in the state file
    or found inside our own namespaces).
    """
    alive = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            alive.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p)]
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_groups(pids: Sequence[int], grace: float = 2.0) -> int:
    """SIGTERM, then after ``grace`` s SIGKILL, the process groups led by ``pids`` (ranks that
    ``testbed run`` started, each in its own session); returns how many groups were alive."""
    alive = [p for p in pids if _alive(p)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in alive:
            try:
                os.killpg(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(_alive(p) for p in alive):
            time.sleep(0.05)
    return len(alive)


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # reap if it is our child
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def delete_namespace(ns: str) -> int:
    """Kill every process inside ``ns``, then delete it (its links go with it); returns how
    many processes were inside."""
    pids = namespace_pids(ns)
    kill_pids(pids)
    ip(None, "netns", "del", ns, check=False)
    return len(pids)

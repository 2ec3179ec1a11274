"""The emulated cluster's description, kept in a small JSON file so later
commands (``reactccl testbed congest|run|down``) find what ``up`` built.

Files live in ``$REACTCCL_TESTBED_DIR`` or ``/run/reactccl/testbed`` (root's
tmpfs: gone after a reboot, like the namespaces themselves), one per prefix:
``<dir>/<prefix>.json``.

The file also says who owns what, so that a command killed with ``kill -9`` leaves
nothing the next command cannot find: the process building the testbed (``owner``,
with its start time so a reused pid does not count) and whether the build finished
(``complete``) or the testbed lives only as long as its owner (``transient``: a
``with Testbed(...)`` block, e.g. ``testbed experiment``); and the rank processes of
the job ``testbed run`` started (``ranks``, with their launcher in ``ranks_owner``).
See :meth:`TestbedState.stale` and :func:`process_token`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .netns import TestbedConfigError, TestbedError

__all__ = ["TestbedState", "CongestionGroup", "state_dir", "new_prefix", "check_prefix",
           "load_state", "known_prefixes", "process_token", "same_process", "HOST_IFNAME", "CONTROL_IFNAME"]

#: Name of the host-side veth in every host namespace, so one GLOO_SOCKET_IFNAME serves all ranks.
HOST_IFNAME = "rcl0"
#: Name of the optional unshaped control-network veth (REACT's control plane, §6.3).
CONTROL_IFNAME = "rclc"

_PREFIX_RE = re.compile(r"[a-z][a-z0-9]{1,11}")


def state_dir() -> Path:
    """Directory holding one ``<prefix>.json`` per live testbed."""
    return Path(os.environ.get("REACTCCL_TESTBED_DIR", "/run/reactccl/testbed"))


def new_prefix() -> str:
    """A fresh run prefix, ``rcl`` + 5 random hex digits (e.g. ``rcl3fa9c``)."""
    return "rcl" + secrets.token_hex(3)[:5]


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if valid (2-12 chars, lowercase letter then letters/digits), else raise."""
    if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
        raise TestbedConfigError(f"prefix {prefix!r}: use 2-12 lowercase letters/digits starting with a letter")
    return prefix


def process_token(pid: int) -> str:
    """An id of process ``pid`` that a later process reusing the pid does not share (its start
    time in clock ticks since boot, field 22 of ``/proc/PID/stat``); "" when no such process
    is alive (a zombie counts as gone)."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return ""
    return "" if fields[0] in ("Z", "X") else fields[19]


def same_process(pid: int, token: str) -> bool:
    """Whether ``pid`` is still the process whose :func:`process_token` was ``token``."""
    return bool(pid) and bool(token) and process_token(pid) == token


@dataclass
class CongestionGroup:
    """External flows into one host: ``flows`` senders, each in its own namespace.

    Attributes:
        into: receiving rank.
        flows: number of TCP flows (one sender namespace each).
        port: TCP port of the sink in the receiving host.
        externals: indices of the external namespaces used as senders.
        pids: process ids of the sink and the senders (ours, for ``stop``).
        duration: seconds the flows last, or None for "until stopped".
    """

    into: int
    flows: int
    port: int
    externals: list[int]
    pids: list[int]
    duration: float | None = None


@dataclass
class TestbedState:
    """Everything needed to find and use a running emulated cluster.

    Attributes:
        prefix: run prefix; every namespace is ``<prefix>-sw``, ``<prefix>-h<i>`` or ``<prefix>-x<j>``.
        hosts: number of host namespaces (ranks).
        rate_bps: link rate in bit/s, both directions of every link.
        queue_bytes: bfifo limit of every shaped egress queue.
        cc: TCP congestion control set in every namespace (reno or bbr).
        control: whether hosts also have an unshaped control link ``rclc`` (10.78.0.0/16).
        externals: number of external (congestion-sender) namespaces created so far.
        congestion: live congestion groups.
        owner, owner_token: pid and :func:`process_token` of the process that built it.
        complete: the build finished (``up`` returned).
        transient: it lives only as long as its owner (a ``with Testbed(...)`` block).
        ranks: ``[pid, token]`` of each rank of the job ``testbed run`` started (each rank
            leads its own process group); ``ranks_owner``: ``[pid, token]`` of that launcher.
    """

    __test__ = False

    prefix: str
    hosts: int
    rate_bps: int
    queue_bytes: int
    cc: str
    control: bool = False
    externals: int = 0
    congestion: list[CongestionGroup] = field(default_factory=list)
    owner: int = 0
    owner_token: str = ""
    complete: bool = False
    transient: bool = False
    ranks: list[list] = field(default_factory=list)
    ranks_owner: list = field(default_factory=list)

    def stale(self) -> bool:
        """Left behind by a killed command: its build never finished, or it was transient,
        and the process that owned it is gone."""
        return (not self.complete or self.transient) and not same_process(self.owner, self.owner_token)

    def orphan_ranks(self) -> list[int]:
        """Pids of recorded ranks still alive whose launcher is gone (a killed ``testbed run``)."""
        if not self.ranks or (self.ranks_owner and same_process(*self.ranks_owner)):
            return []
        return [int(p) for p, tok in self.ranks if same_process(int(p), tok)]

    @property
    def path(self) -> Path:
        return state_dir() / f"{self.prefix}.json"

    @property
    def switch_ns(self) -> str:
        return f"{self.prefix}-sw"

    def host_ns(self, rank: int) -> str:
        """Namespace of host ``rank``; raises TestbedError when out of range."""
        if not 0 <= rank < self.hosts:
            raise TestbedConfigError(f"rank {rank} out of range: testbed {self.prefix} has {self.hosts} hosts")
        return f"{self.prefix}-h{rank}"

    def host_addr(self, rank: int) -> str:
        """IPv4 address of host ``rank`` (10.77.0.<rank+1>, private to the namespaces)."""
        self.host_ns(rank)
        return f"10.77.{(rank + 1) // 256}.{(rank + 1) % 256}"

    def control_addr(self, rank: int) -> str:
        """Control-network address of host ``rank`` (10.78.0.<rank+1>)."""
        self.host_ns(rank)
        return f"10.78.{(rank + 1) // 256}.{(rank + 1) % 256}"

    def external_ns(self, j: int) -> str:
        return f"{self.prefix}-x{j}"

    def external_addr(self, j: int) -> str:
        """IPv4 address of external sender ``j`` (10.77.128.<j+1> upward)."""
        return f"10.77.{128 + (j + 1) // 256}.{(j + 1) % 256}"

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(self.path)

    def remove_file(self) -> None:
        self.path.unlink(missing_ok=True)

    @classmethod
    def from_dict(cls, d: dict) -> "TestbedState":
        groups = [CongestionGroup(**g) for g in d.get("congestion", [])]
        known = set(cls.__dataclass_fields__)
        # a file written before ownership was recorded: nothing says it is half-built
        return cls(**{"complete": "owner" not in d, **{k: v for k, v in d.items() if k in known},
                      "congestion": groups})


def known_prefixes() -> list[str]:
    """Prefixes with a state file (sorted)."""
    d = state_dir()
    return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []


def load_state(prefix: str | None = None) -> TestbedState:
    """The state of testbed ``prefix``; with None, the only one there is.

    Raises TestbedError when none exists, or several exist and no prefix was given.
    """
    if prefix is None:
        known = known_prefixes()
        if not known:
            raise TestbedError(f"no testbed is up (no state file in {state_dir()}); "
                               "run `reactccl testbed up` first")
        if len(known) > 1:
            raise TestbedError(f"several testbeds are up ({', '.join(known)}); choose one with --prefix")
        prefix = known[0]
    path = state_dir() / f"{check_prefix(prefix)}.json"
    if not path.exists():
        raise TestbedError(f"no testbed with prefix {prefix!r} (no {path})")
    return TestbedState.from_dict(json.loads(path.read_text()))

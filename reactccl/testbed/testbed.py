"""An emulated cluster on one machine: a star of network namespaces.

Layout for ``Testbed(hosts=4, rate="200mbit", prefix="rcl1")``::

                     namespace rcl1-sw
          +-------------- br0 (bridge) --------------+
          h0          h1          h2          h3      x0 ...     <- shaped egress (towards the host)
          |           |           |           |       |
        rcl0        rcl0        rcl0        rcl0    rcl0         <- shaped egress (towards the bridge)
      rcl1-h0     rcl1-h1     rcl1-h2     rcl1-h3   rcl1-x0      (one namespace each)
      10.77.0.1   10.77.0.2   ...                   10.77.128.1

Every veth is shaped in both directions (htb + bfifo, see :mod:`.shaping`), so
a host's uplink and downlink are each a ``rate`` link, like a NIC on a
non-blocking switch. External namespaces ``x<j>`` send the congestion traffic
(:meth:`Testbed.congest`); they are not ranks of the job. The host-side veth is
named ``rcl0`` everywhere, so ``GLOO_SOCKET_IFNAME=rcl0`` serves every rank.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from . import netns
from .launcher import RunResult, launch
from .netns import TestbedConfigError, TestbedError, ip, kill_groups
from .shaping import DEFAULT_QUEUE_BYTES, parse_rate, parse_size, shape_egress
from .state import (
    CONTROL_IFNAME,
    HOST_IFNAME,
    CongestionGroup,
    TestbedState,
    check_prefix,
    known_prefixes,
    load_state,
    new_prefix,
    process_token,
)
from .traffic import SCRIPT as TRAFFIC_SCRIPT  # the stdlib-only sender/receiver, run by path inside namespaces

__all__ = ["Testbed", "TRAFFIC_SCRIPT", "MAX_CONGEST_SECONDS", "sweep_stale", "orphan_prefixes", "kill_groups"]

#: Upper bound on "until stopped" congestion (a day), so no sender runs forever.
MAX_CONGEST_SECONDS = 86400.0
_SINK_PORT0 = 5201
_CC_CHOICES = ("reno", "bbr", "cubic")


class Testbed:
    """A star of ``hosts`` namespaces behind one bridge, every link shaped to ``rate``.

    Use as a context manager (``with Testbed(4, "200mbit") as tb: ...``): ``up()``
    on entry, ``down()`` on exit, also on errors and Ctrl-C. :meth:`attach`
    returns a handle on a testbed built earlier (e.g. by the CLI).

    Args:
        hosts: number of ranks, 1..250.
        rate: link rate, tc units (``"200mbit"``) or bit/s.
        prefix: run prefix for every namespace name; default a fresh random one.
        queue: bfifo limit per shaped queue (tc units, ``"256kb"`` = 256 KiB).
        cc: TCP congestion control inside the namespaces. ``reno`` (default)
            shares a bottleneck about equally between flows, which makes the
            congestion share predictable; ``bbr`` is the kernel default here.
        control: also give every host an unshaped control link ``rclc``
            (10.78.0.0/16, its own bridge ``br1``), so REACT's control plane has
            its own interface as in the paper (§6.3); ranks get
            ``REACTCCL_CONTROL_IFNAME=rclc``.
    Raises:
        TestbedError / ValueError for bad arguments; TestbedError when root or
        iproute2 is missing (at ``up``), or the prefix is in use.
    """

    __test__ = False

    def __init__(self, hosts: int = 4, rate: str | int = "200mbit", prefix: str | None = None,
                 queue: str | int = DEFAULT_QUEUE_BYTES, cc: str = "reno", control: bool = False):
        if not isinstance(hosts, int) or not 1 <= hosts <= 250:
            raise TestbedConfigError(f"hosts={hosts!r}: need an integer in 1..250")
        if cc not in _CC_CHOICES:
            raise TestbedConfigError(f"cc={cc!r}: choose one of {', '.join(_CC_CHOICES)}")
        self.state = TestbedState(prefix=check_prefix(prefix or new_prefix()), hosts=hosts,
                                  rate_bps=parse_rate(rate), queue_bytes=parse_size(queue), cc=cc,
                                  control=bool(control))
        self._is_up = False

    @classmethod
    def attach(cls, prefix: str | None = None) -> "Testbed":
        """A handle on the running testbed ``prefix`` (or the only one). Raises TestbedError."""
        tb = cls.__new__(cls)
        tb.state = load_state(prefix)
        tb._is_up = True
        return tb

    # -- naming -------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        return self.state.prefix

    @property
    def hosts(self) -> int:
        return self.state.hosts

    @property
    def rate_bps(self) -> int:
        return self.state.rate_bps

    @property
    def ifname(self) -> str:
        """Interface name of every host's link (for GLOO_SOCKET_IFNAME)."""
        return HOST_IFNAME

    def host_ns(self, rank: int) -> str:
        return self.state.host_ns(rank)

    def host_addr(self, rank: int) -> str:
        return self.state.host_addr(rank)

    def namespaces(self) -> list[str]:
        """Existing namespaces of this run (by prefix)."""
        return netns.list_namespaces(self.prefix + "-")

    # -- lifecycle ----------------------------------------------------------------------
    def up(self) -> "Testbed":
        """Build the star. On any failure (or Ctrl-C) removes what it built and re-raises.

        First removes what killed commands left (:func:`sweep_stale`: half-built testbeds and
        transient ones whose owner is gone, with their processes). The state file is written
        before the first namespace, with this process as owner, so a ``kill -9`` of this
        call leaves a file that the next ``up`` or ``down`` finds."""
        netns.require_netns()
        self.swept = sweep_stale()
        if self.namespaces() or self.state.path.exists():
            raise TestbedError(f"prefix {self.prefix!r} is in use (namespaces or {self.state.path} exist); "
                               f"run `reactccl testbed down --prefix {self.prefix}` or pick another prefix")
        self.state.owner, self.state.owner_token = os.getpid(), process_token(os.getpid())
        self.state.complete = False
        self.state.save()  # first, so `down` finds a half-built testbed
        try:
            sw = self.state.switch_ns
            self._add_namespace(sw)
            ip(sw, "link", "add", "br0", "type", "bridge", "stp_state", "0", "forward_delay", "0")
            ip(sw, "link", "set", "br0", "up")
            if self.state.control:
                ip(sw, "link", "add", "br1", "type", "bridge", "stp_state", "0", "forward_delay", "0")
                ip(sw, "link", "set", "br1", "up")
            for r in range(self.hosts):
                self._add_node(self.host_ns(r), f"h{r}", self.host_addr(r))
                if self.state.control:
                    self._add_control_link(r)
        except BaseException:
            self.down()
            raise
        self.state.complete = True
        self.state.save()
        self._is_up = True
        return self

    def down(self) -> dict:
        """Stop our processes (recorded ranks of ``run`` by process group, congestion flows,
        anything inside the namespaces) and delete every namespace with this prefix; remove
        the state file.

        Safe to call twice or on a half-built testbed. Returns what it removed:
        ``{"namespaces": [...], "processes": n, "state_file": bool}``.
        """
        removed = {"namespaces": [], "processes": 0, "state_file": self.state.path.exists()}
        if netns.netns_unavailable() is None:
            ranks = [int(p) for p, tok in self.state.ranks if tok and process_token(int(p)) == tok]
            removed["processes"] += kill_groups(ranks) + self.stop_congestion(save=False)
            for ns in self.namespaces():
                removed["processes"] += netns.delete_namespace(ns)
                removed["namespaces"].append(ns)
        self.state.remove_file()
        self._is_up = False
        return removed

    def __enter__(self) -> "Testbed":
        if not self._is_up:
            self.state.transient = True  # removed by the next up/down if this process dies in the block
        return self if self._is_up else self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    def _add_namespace(self, ns: str) -> None:
        ip(None, "netns", "add", ns)
        netns.ns_sysctl(ns, {"net.ipv6.conf.all.disable_ipv6": "1",
                             "net.ipv6.conf.default.disable_ipv6": "1",
                             "net.ipv4.tcp_congestion_control": self.state.cc})
        ip(ns, "link", "set", "lo", "up")

    def _add_node(self, ns: str, port: str, addr: str) -> None:
        """Namespace ``ns`` joined to the bridge by veth ``rcl0`` <-> ``port``, shaped both ways."""
        sw = self.state.switch_ns
        self._add_namespace(ns)
        ip(sw, "link", "add", port, "type", "veth", "peer", "name", HOST_IFNAME, "netns", ns)
        ip(sw, "link", "set", port, "master", "br0")
        ip(ns, "addr", "add", f"{addr}/16", "dev", HOST_IFNAME)
        shape_egress(ns, HOST_IFNAME, self.rate_bps, self.state.queue_bytes)
        shape_egress(sw, port, self.rate_bps, self.state.queue_bytes)
        ip(sw, "link", "set", port, "up")
        ip(ns, "link", "set", HOST_IFNAME, "up")

    def _add_control_link(self, rank: int) -> None:
        """Unshaped veth ``rclc`` <-> ``c<rank>`` on bridge br1 (the control network)."""
        sw, ns = self.state.switch_ns, self.host_ns(rank)
        ip(sw, "link", "add", f"c{rank}", "type", "veth", "peer", "name", CONTROL_IFNAME, "netns", ns)
        ip(sw, "link", "set", f"c{rank}", "master", "br1", "up")
        ip(ns, "addr", "add", f"{self.state.control_addr(rank)}/16", "dev", CONTROL_IFNAME)
        ip(ns, "link", "set", CONTROL_IFNAME, "up")

    # -- processes ----------------------------------------------------------------------
    def popen(self, ns: str, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` inside namespace ``ns`` (``ip netns exec``); kwargs go to Popen."""
        if ns not in self.namespaces():
            raise TestbedError(f"namespace {ns} does not exist (is testbed {self.prefix} up?)")
        return subprocess.Popen(["ip", "netns", "exec", ns, *argv], **kwargs)

    def run(self, cmd: Sequence[str], *, timeout: float = 600.0, env: Mapping[str, str] | None = None,
            master_port: int = 29500, stream: bool = True, grace: float = 5.0,
            ranks_per_host: int = 1) -> RunResult:
        """Run ``cmd`` ``ranks_per_host`` times per host (ranks host-major), torchrun-style, and
        wait; see :func:`.launcher.launch`."""
        return launch(self, cmd, timeout=timeout, env=env, master_port=master_port,
                      stream=stream, grace=grace, per_host=ranks_per_host)

    # -- congestion ---------------------------------------------------------------------
    def congest(self, into: int, flows: int, duration: float | None = None) -> CongestionGroup:
        """Start ``flows`` bulk TCP flows into host ``into``, one per external namespace.

        Each sender lives in its own external namespace (shaped like a host), so
        the flows meet only at ``into``'s downlink; with the job sending one flow
        there too, each of the P+1 flows gets about rate/(P+1) under reno.
        Flows last ``duration`` seconds, or until :meth:`stop_congestion`
        (bounded by :data:`MAX_CONGEST_SECONDS`). Returns the recorded group.
        Raises TestbedError for a bad rank/flow count or when the sink does not start.
        """
        netns.require_netns()
        if not isinstance(flows, int) or not 1 <= flows <= 64:
            raise TestbedConfigError(f"flows={flows!r}: need an integer in 1..64")
        seconds = MAX_CONGEST_SECONDS if duration is None else float(duration)
        if not 0 < seconds <= MAX_CONGEST_SECONDS:
            raise TestbedConfigError(f"duration={duration!r}: need 0 < seconds <= {MAX_CONGEST_SECONDS:g}")
        dst_ns, dst_addr = self.host_ns(into), self.host_addr(into)
        used = {j for g in self.state.congestion for j in g.externals}
        free = [j for j in range(self.state.externals) if j not in used]
        while len(free) < flows:
            j = self.state.externals
            self._add_node(self.state.external_ns(j), f"x{j}", self.state.external_addr(j))
            self.state.externals += 1
            self.state.save()
            free.append(j)
        externals = free[:flows]
        port = _SINK_PORT0 + max([g.port - _SINK_PORT0 + 1 for g in self.state.congestion], default=0)
        sink = self.start_sink(dst_ns, port, seconds + 5.0, count=None)
        group = CongestionGroup(into=into, flows=flows, port=port, externals=externals,
                                pids=[sink.pid], duration=duration)
        self.state.congestion.append(group)
        try:
            for j in externals:
                src = self.popen(self.state.external_ns(j),
                                 [sys.executable, TRAFFIC_SCRIPT, "source", "--to", dst_addr,
                                  "--port", str(port), "--seconds", str(seconds)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
                group.pids.append(src.pid)
        finally:
            self.state.save()
        return group

    def stop_congestion(self, save: bool = True) -> int:
        """Stop every congestion flow this testbed started; returns how many processes were signalled."""
        pids = [p for g in self.state.congestion for p in g.pids if _is_traffic(p)]  # not a reused pid
        netns.kill_pids(pids)
        self.state.congestion = []
        if save and self.state.path.exists():
            self.state.save()
        return len(pids)

    def start_sink(self, ns: str, port: int, seconds: float, count: int | None,
                   ready_timeout: float = 15.0) -> subprocess.Popen:
        """Start a :mod:`.traffic` sink in namespace ``ns`` on ``port`` and wait (bounded by
        ``ready_timeout`` s) for its ``ready`` line. It exits after ``seconds``, or after
        ``count`` connections closed (then it prints their statistics as JSON lines).

        Raises:
            TestbedError: the sink did not report ready (port in use, namespace gone).
        """
        argv = [sys.executable, TRAFFIC_SCRIPT, "sink", "--port", str(port), "--seconds", str(seconds)]
        if count is not None:
            argv += ["--count", str(count)]
        proc = self.popen(ns, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True)
        line = _readline_with_timeout(proc, ready_timeout)
        if line.strip() != "ready":
            netns.kill_pids([proc.pid])
            err = proc.stderr.read() if proc.poll() is not None else ""
            raise TestbedError(f"traffic sink in {ns} on port {port} did not start: {line!r} {err.strip()}")
        return proc


def _is_traffic(pid: int) -> bool:
    """Whether ``pid`` is alive and runs our traffic script (a recorded pid may have been reused)."""
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            return netns._alive(pid) and TRAFFIC_SCRIPT.encode() in f.read()
    except OSError:
        return False


def sweep_stale() -> list[tuple[str, dict]]:
    """Remove every testbed whose state file says a killed command left it (a half-built
    ``up``, or a transient ``with Testbed`` block, whose owner process is gone): its
    processes, namespaces and state file. Also stops the ranks of killed ``testbed run``
    launchers on testbeds that stay. Returns ``[(prefix, what down() removed)]``."""
    out = []
    for prefix in known_prefixes():
        try:
            st = load_state(prefix)
        except (TestbedError, ValueError, OSError):
            continue
        tb = Testbed.attach(prefix)
        if st.stale():
            out.append((prefix, tb.down()))
        elif st.orphan_ranks():
            n = kill_groups(st.orphan_ranks())
            tb.state.ranks, tb.state.ranks_owner = [], []
            tb.state.save()
            out.append((prefix, {"namespaces": [], "processes": n, "state_file": False}))
    return out


def orphan_prefixes() -> list[str]:
    """Prefixes of namespaces named like a testbed's (``P-sw``) that have no state file here
    (e.g. left by a ``down`` killed half way, or by a testbed with another REACTCCL_TESTBED_DIR).
    Not removed automatically: ``testbed down --prefix P`` removes them."""
    known = set(known_prefixes())
    return sorted({ns[:-3] for ns in netns.list_namespaces() if ns.endswith("-sw")} - known)


def _readline_with_timeout(proc: subprocess.Popen, timeout: float) -> str:
    """One line of ``proc.stdout``, or "" after ``timeout`` seconds / EOF."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if ready:
            return proc.stdout.readline()
    return ""

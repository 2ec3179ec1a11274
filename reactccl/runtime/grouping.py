"""Which ranks share a server, learned from the ranks themselves, and the pattern built on it.

A hierarchical pattern (NCCL's ring or tree over servers, :mod:`reactccl.algorithms.hier`) is only
right when its servers are the machines the ranks really run on: a chain it keeps "inside a server"
must really stay on NVLink / loopback. So the grouping is learned, never assumed:

1. Every rank names its host (:func:`host_identity`: host name, boot id and network namespace, so
   namespaces of the emulated cluster on one machine are distinct hosts) and what its launcher
   says (torchrun's ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, when set).
2. One all-gather (:func:`learn_servers`) gives every rank every rank's record; :func:`plan_servers`
   turns them into the same :class:`ServerGrouping` on every rank.
3. Host identity decides who shares a server. The launcher's variables only order the ranks inside
   a server (``LOCAL_RANK`` is the GPU index, which fixes the GPU's NIC, :mod:`~reactccl.algorithms.hier`)
   and are checked: a launcher that claims otherwise (``LOCAL_WORLD_SIZE`` other than the ranks on
   that host, one ``GROUP_RANK`` on two hosts, ...) is named in :attr:`ServerGrouping.warnings`,
   and host identity wins. A plain ``mp.spawn`` (no variables) is grouped by host identity alone.

Shapes handled: S servers of G ranks each in rank order (torchrun's layout) give the hierarchy on
positions = ranks. S servers of G ranks in any other order (interleaved, or ``LOCAL_RANK`` not in rank
order) give the same hierarchy on positions, relabelled so that position ``s*G + l`` is server s's
local rank l (:attr:`ServerGrouping.order`). Flat, with the reason in :attr:`ServerGrouping.reason`:
one server, one rank per server, or servers with different rank counts (NCCL's tree and ring over
servers here need G ranks on each).

Test-only override: ``REACTCCL_TEST_HOST_ID`` replaces the host identity of a rank. It exists so a
test on one machine can run two torchrun "nodes" that really are one host; never set it on a
cluster (every rank sharing a value would be treated as one server).

Source: torchrun's environment (``torch.distributed.run``: ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``GROUP_RANK``); NCCL groups ranks into nodes by host hash the same way (``getHostHash``: host name
plus boot id, ``src/misc/utils.cc``) and builds its hierarchy on those nodes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..algorithms import generate
from ..pattern import CollectivePattern

log = logging.getLogger("reactccl.runtime")

__all__ = ["ServerGrouping", "host_identity", "rank_record", "plan_servers", "learn_servers",
           "server_pattern", "HIERARCHICAL", "TEST_HOST_ENV"]

#: Environment variable that replaces a rank's host identity; for tests on one machine only.
TEST_HOST_ENV = "REACTCCL_TEST_HOST_ID"
#: Generators that build NCCL's hierarchy from ``servers``/``gpus`` options.
HIERARCHICAL = ("ring", "nccl-tree")
_LAUNCHER_VARS = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def host_identity(env: Mapping[str, str] | None = None) -> str:
    """This process's host, as a string equal for exactly the processes that share a machine and
    a network namespace: ``hostname/boot-id/netns-inode`` (the parts Linux offers; off Linux the
    host name alone). ``REACTCCL_TEST_HOST_ID`` in ``env`` (default ``os.environ``) replaces it
    (module docstring: tests only)."""
    env = os.environ if env is None else env
    fake = env.get(TEST_HOST_ENV)
    if fake:
        return f"test:{fake}"
    parts = [socket.gethostname(), _read("/proc/sys/kernel/random/boot_id")]
    with contextlib.suppress(OSError):     # off Linux: no network namespaces to tell apart
        parts.append(str(os.stat("/proc/self/ns/net").st_ino))
    return "/".join(p for p in parts if p)


def rank_record(env: Mapping[str, str] | None = None) -> dict:
    """What this rank tells the others: ``{"host": host_identity(), "LOCAL_RANK": int | None,
    "LOCAL_WORLD_SIZE": ..., "GROUP_RANK": ...}`` (None where the variable is unset or not an
    integer)."""
    env = os.environ if env is None else env
    rec: dict = {"host": host_identity(env)}
    for name in _LAUNCHER_VARS:
        try:
            rec[name] = int(env[name])
        except (KeyError, ValueError):
            rec[name] = None
    return rec


@dataclass(frozen=True)
class ServerGrouping:
    """Ranks grouped into servers (module docstring); every rank of a job holds an equal one.

    Attributes:
        hosts: host identity of every rank, shape ``(N,)``.
        servers: the ranks of each server in local order (GPU index), servers ordered by their
            lowest rank.
        hierarchical: whether a hierarchical pattern fits (S > 1 servers of G > 1 ranks each).
        reason: how the grouping was found and, when flat, why.
        warnings: launcher variables that contradict host identity (host identity was used).
    """

    hosts: tuple[str, ...]
    servers: tuple[tuple[int, ...], ...]
    hierarchical: bool
    reason: str
    warnings: tuple[str, ...] = field(default=())

    @property
    def num_ranks(self) -> int:
        """N."""
        return len(self.hosts)

    @property
    def num_servers(self) -> int:
        """S."""
        return len(self.servers)

    @property
    def gpus(self) -> int | None:
        """G, the ranks of every server, or None when servers differ in size."""
        sizes = {len(s) for s in self.servers}
        return sizes.pop() if len(sizes) == 1 else None

    @property
    def order(self) -> np.ndarray:
        """The rank at every position ``s*G + l`` (server s, local l), shape ``(N,)`` int64: the
        permutation that relabels a pattern built on positions onto the ranks."""
        return np.array([r for s in self.servers for r in s], dtype=np.int64)

    @property
    def in_rank_order(self) -> bool:
        """Whether position = rank (servers of consecutive ranks, locals in rank order)."""
        return bool(np.array_equal(self.order, np.arange(self.num_ranks)))

    def server_of_rank(self) -> np.ndarray:
        """Server index of every rank, shape ``(N,)`` int64."""
        out = np.empty(self.num_ranks, dtype=np.int64)
        for s, ranks in enumerate(self.servers):
            out[list(ranks)] = s
        return out

    def describe(self) -> str:
        """One line: ``"4 servers x 2 ranks (hierarchical): ..."`` or the flat reason."""
        sizes = [len(s) for s in self.servers]
        shape = (f"{len(sizes)} servers x {sizes[0]} ranks" if len(set(sizes)) == 1
                 else f"{len(sizes)} servers of {sizes} ranks")
        return f"{shape} ({'hierarchical' if self.hierarchical else 'flat'}): {self.reason}"


def _local_order(ranks: list[int], records: Sequence[Mapping]) -> tuple[list[int], list[str]]:
    """Ranks of one host in local order: by ``LOCAL_RANK`` when every one of them has a distinct
    ``LOCAL_RANK`` in 0..g-1, else by rank. Also the contradictions found (for warnings)."""
    g = len(ranks)
    local = [records[r].get("LOCAL_RANK") for r in ranks]
    size = [records[r].get("LOCAL_WORLD_SIZE") for r in ranks]
    notes = []
    bad_size = [(r, s) for r, s in zip(ranks, size, strict=True) if s is not None and s != g]
    if bad_size:
        r, s = bad_size[0]
        notes.append(f"rank {r}: LOCAL_WORLD_SIZE={s}, but {g} rank(s) share its host {records[r]['host']!r}")
    known = [int(x) for x in local if x is not None]
    if len(known) == g:
        if sorted(known) == list(range(g)):
            return [r for _, r in sorted(zip(known, ranks, strict=True))], notes
        notes.append(f"ranks {ranks} share host {records[ranks[0]]['host']!r} but claim LOCAL_RANK {local}, "
                     f"not a permutation of 0..{g - 1}; ordered by rank")
    return sorted(ranks), notes


def plan_servers(records: Sequence[Mapping]) -> ServerGrouping:
    """The server grouping of ranks whose :func:`rank_record` are ``records`` (index = rank).

    Pure: every rank computes the same result from the same all-gathered records.

    Raises:
        ValueError: no records, or a record without ``"host"`` (naming the rank).
    """
    if not records:
        raise ValueError("plan_servers: no rank records")
    hosts = []
    for r, rec in enumerate(records):
        h = rec.get("host") if isinstance(rec, Mapping) else None
        if not isinstance(h, str) or not h:
            raise ValueError(f"plan_servers: rank {r}'s record has no host identity: {rec!r}")
        hosts.append(h)
    by_host: dict[str, list[int]] = {}
    for r, h in enumerate(hosts):
        by_host.setdefault(h, []).append(r)       # dict order: hosts by their lowest rank
    warnings: list[str] = []
    servers = []
    for ranks in by_host.values():
        ordered, notes = _local_order(ranks, records)
        servers.append(tuple(ordered))
        warnings += notes
    group_host: dict[int, str] = {}
    for r, rec in enumerate(records):
        gr = rec.get("GROUP_RANK")
        if gr is None:
            continue
        if gr in group_host and group_host[gr] != hosts[r]:
            warnings.append(f"rank {r}: GROUP_RANK={gr} is also claimed by a rank on another host "
                            f"({group_host[gr]!r} vs {hosts[r]!r})")
        group_host.setdefault(gr, hosts[r])
    if len(set(group_host.values())) < len(group_host):
        warnings.append(f"ranks on one host claim different GROUP_RANKs ({sorted(group_host)} on "
                        f"{len(set(group_host.values()))} hosts)")
    has_env = any(rec.get("LOCAL_WORLD_SIZE") is not None for rec in records)
    source = "host identity" + (", launcher variables checked" if has_env else " (no launcher variables)")
    if warnings:
        source += f"; {len(warnings)} launcher claim(s) contradicted and ignored"
    sizes = [len(s) for s in servers]
    if len(servers) == 1:
        flat, why = True, f"all {len(hosts)} ranks share one host, no inter-server level"
    elif max(sizes) == 1:
        flat, why = True, "one rank per host"
    elif len(set(sizes)) > 1:
        flat, why = True, (f"hosts hold different numbers of ranks {sizes}: the hierarchy over servers "
                           "needs the same G on each, so the flat pattern runs")
    else:
        flat, why = False, ""
    if not flat and [r for srv in servers for r in srv] != list(range(len(hosts))):
        why = "ranks relabelled so each server's ranks are consecutive positions"
    return ServerGrouping(tuple(hosts), tuple(servers), not flat, f"{source}{'; ' if why else ''}{why}",
                          tuple(warnings))


def learn_servers(group=None, env: Mapping[str, str] | None = None) -> ServerGrouping:
    """Collective over ``group`` (default the default group): all-gather every rank's
    :func:`rank_record` (plain JSON, :func:`~reactccl.runtime.wire.all_gather_json`) and
    :func:`plan_servers` them. Contradicting launcher variables are logged as warnings.

    Raises:
        MessageError: the exchange failed (a rank's record could not be sent or read).
    """
    from .wire import all_gather_json  # needs torch

    grouping = plan_servers(all_gather_json(rank_record(env), group=group))
    for w in grouping.warnings:
        log.warning("server grouping: %s", w)
    return grouping


_SERVER_OPTIONS = ("servers", "gpus", "hierarchy")


def server_pattern(algorithm: str, n: int, grouping: ServerGrouping | None, **options) -> CollectivePattern:
    """``generate(algorithm, n, **options)``, hierarchical over ``grouping`` where it fits.

    For ``ring`` and ``nccl-tree`` without ``servers``/``gpus``/``hierarchy`` options and a
    hierarchical grouping: the pattern over S servers of G GPUs (``nics`` and ``channels`` as given,
    else NCCL's defaults: one NIC per GPU) relabelled onto the ranks (:attr:`ServerGrouping.order`).
    Otherwise the pattern the options ask for, except that on a flat grouping a ``nics`` option
    (meaningless without servers) is dropped.

    Raises:
        PatternError: bad generator options (naming them).
        ValueError: ``grouping`` has another rank count than ``n``.
    """
    if grouping is not None and grouping.num_ranks != n:
        raise ValueError(f"server_pattern: the grouping has {grouping.num_ranks} ranks, the pattern {n}")
    if grouping is None or algorithm not in HIERARCHICAL or any(k in options for k in _SERVER_OPTIONS):
        return generate(algorithm, n, **options)
    if not grouping.hierarchical:
        options.pop("nics", None)
        return generate(algorithm, n, **options)
    p = generate(algorithm, n, servers=grouping.num_servers, gpus=grouping.gpus, **options)
    return p if grouping.in_rank_order else p.relabel(grouping.order)

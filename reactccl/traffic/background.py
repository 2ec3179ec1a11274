"""Background traffic and degraded links: the congestion scenarios of REACT §7.1, §7.3.1, §7.3.4.

Concrete traffic is :class:`LongLived` (always sending, REACT's "external
flows") and :class:`Bulk` (a burst of bytes every period on a clock that runs
across epochs, like the testbed's 1 GB RDMA ping-pong, §7.2). Scenario specs
pick hosts relative to a job's placement and are resolved with a seeded rng:
:class:`IntoRanks` / :class:`OutOfRanks` (p flows between an outside host and
each chosen rank) and :class:`RandomPairs` (x random (rank, outside host) pairs
with p flows each, §7.3.1). :func:`parse_background` and :func:`parse_degrade`
read the command-line forms. A bulk source must offer less than its path can carry
(``bytes*8/period`` below the smallest capacity) and a degrade may only lower a link's
capacity; both are checked with errors naming the spec.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ReactcclError
from ..topology import Topology, TopologyError, UnitError, parse_rate, parse_size, parse_time

__all__ = ["LongLived", "Bulk", "IntoRanks", "OutOfRanks", "RandomPairs", "BackgroundError",
           "resolve_background", "parse_background", "parse_degrade", "random_degrade", "job_cables", "job_degrade",
           "bulk_path", "degrade_rates", "ResolvedBackground"]

HostRef = int | str


class BackgroundError(ReactcclError, ValueError):
    """A background or degrade spec is wrong; the message names the field."""


MAX_BACKGROUND_FLOWS = 10_000
"""Most long-lived background flows in one run: every one of them stays active for the whole
run and shares links with the job's flows, so more is refused before any work."""


def _room(have: int, add: int, spec) -> None:
    """BackgroundError if ``have + add`` long-lived flows would pass :data:`MAX_BACKGROUND_FLOWS`."""
    if have + add > MAX_BACKGROUND_FLOWS:
        raise BackgroundError(f"background {spec}: would give {have + add:,} long-lived flows ({add:,} from this "
                              f"spec); each is active for the whole run and slows every event, the limit is "
                              f"{MAX_BACKGROUND_FLOWS:,}")


@dataclass(frozen=True)
class LongLived:
    """``count`` long-lived flows (infinite bytes) from host ``src`` to host ``dst`` (ids or names)."""

    src: HostRef
    dst: HostRef
    count: int = 1


@dataclass(frozen=True)
class Bulk:
    """A flow of ``nbytes`` from ``src`` to ``dst`` starting at ``phase + k * period`` (s) on the
    global clock, k = 0, 1, ...; a burst still sending when an epoch ends carries on into the next."""

    src: HostRef
    dst: HostRef
    nbytes: float
    period: float
    phase: float = 0.0


@dataclass(frozen=True)
class IntoRanks:
    """For each rank in ``ranks``: ``p`` long-lived flows from one random outside host into it."""

    ranks: tuple[int, ...]
    p: int = 1


@dataclass(frozen=True)
class OutOfRanks:
    """For each rank in ``ranks``: ``p`` long-lived flows from it to one random outside host."""

    ranks: tuple[int, ...]
    p: int = 1


@dataclass(frozen=True)
class RandomPairs:
    """``x`` distinct random job ranks, each paired with a random outside host, ``p`` flows per pair.

    ``direction="out"`` (REACT §7.3.1: sources among the job's nodes, destinations
    among the remaining nodes) or ``"in"``.
    """

    x: int
    p: int = 1
    direction: str = "out"


Background = LongLived | Bulk | IntoRanks | OutOfRanks | RandomPairs


def _outside(topology: Topology, placement: np.ndarray) -> np.ndarray:
    out = np.setdiff1d(np.arange(topology.num_hosts), placement)
    if out.size == 0:
        raise BackgroundError(f"background: every host of {topology.name} runs a rank; "
                              "no outside host can send external flows")
    return out


def _check_ranks(ranks: Iterable[int], n: int) -> list[int]:
    ranks = [int(r) for r in ranks]
    for r in ranks:
        if not 0 <= r < n:
            raise BackgroundError(f"background: rank {r} out of range 0..{n - 1}")
    return ranks


def _check_p(p: int, name: str = "p", where: str = "background") -> int:
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise BackgroundError(f"{where}: {name} must be an integer >= 1, got {p!r}")
    return int(p)


def bulk_path(topology: Topology, bulk: Bulk, index: int) -> np.ndarray:
    """Link ids of the ``index``-th resolved bulk source: ECMP with key ``(-2, index, 0)`` (one path
    for the whole run)."""
    return topology.ecmp_path(bulk.src, bulk.dst, (-2, int(index), 0))


def _check_bulk_rate(topology: Topology, bulk: Bulk, index: int, spec: Bulk) -> None:
    """BackgroundError unless the bulk's offered rate ``bytes*8/period`` is below its path's smallest
    capacity (otherwise its backlog grows each period and the run never settles)."""
    path = bulk_path(topology, bulk, index)
    offered = bulk.nbytes * 8.0 / bulk.period
    available = float(topology.capacity[path].min())
    if offered >= available:
        raise BackgroundError(
            f"bulk:src={spec.src},dst={spec.dst},bytes={spec.nbytes:g},period={spec.period:g}s "
            f"({topology.hosts[bulk.src]}->{topology.hosts[bulk.dst]}): offers "
            f"{offered / 1e9:.4g} Gbps (bytes*8/period) but its path's smallest capacity is "
            f"{available / 1e9:.4g} Gbps, so its backlog would never drain; use fewer bytes or a longer period")


def resolve_background(specs: Sequence[Background], topology: Topology, placement: np.ndarray,
                       seed: int = 0) -> tuple[list[tuple[int, int]], list[Bulk]]:
    """Concrete background traffic for a job placed on ``placement`` (host ids, shape ``(N,)``).

    Returns:
        ``(long_lived, bulks)``: one ``(src_host, dst_host)`` per long-lived flow
        (a pair appears ``p`` times for ``p`` flows) and the bulk sources with host ids.
        Random choices use ``numpy.random.default_rng([seed, 1])`` in spec order.

    Raises:
        BackgroundError: bad ranks/counts, no outside host, a flow from a host to itself, a
            bulk source offering ``bytes*8/period`` >= the smallest capacity on its path.
        TopologyError: unknown host.
    """
    rng = np.random.default_rng([int(seed), 1])
    placement = np.asarray(placement, dtype=np.int64)
    n = len(placement)
    flows: list[tuple[int, int]] = []
    bulks: list[Bulk] = []
    for spec in specs:
        if isinstance(spec, LongLived):
            s, d = topology.host_id(spec.src), topology.host_id(spec.dst)
            _room(len(flows), _check_p(spec.count, "count"), spec)
            flows += [(s, d)] * spec.count
        elif isinstance(spec, Bulk):
            s, d = topology.host_id(spec.src), topology.host_id(spec.dst)
            if not (np.isfinite([spec.nbytes, spec.period, spec.phase]).all() and spec.nbytes > 0
                    and spec.period > 0 and spec.phase >= 0):
                raise BackgroundError(f"bulk: bytes and period must be finite and > 0 and phase >= 0, got {spec}")
            if s == d:
                raise BackgroundError(f"background: a flow from host {topology.hosts[s]!r} to itself")
            bulk = Bulk(s, d, float(spec.nbytes), float(spec.period), float(spec.phase))
            _check_bulk_rate(topology, bulk, len(bulks), spec)
            bulks.append(bulk)
        elif isinstance(spec, (IntoRanks, OutOfRanks)):
            p = _check_p(spec.p)
            _room(len(flows), p * len(spec.ranks), spec)
            out = _outside(topology, placement)
            for r in _check_ranks(spec.ranks, n):
                h = int(rng.choice(out))
                pair = (h, int(placement[r])) if isinstance(spec, IntoRanks) else (int(placement[r]), h)
                flows += [pair] * p
        elif isinstance(spec, RandomPairs):
            p, x = _check_p(spec.p), _check_p(spec.x, "x")
            if spec.direction not in ("in", "out"):
                raise BackgroundError(f"pairs: dir must be 'in' or 'out', got {spec.direction!r}")
            if x > n:
                raise BackgroundError(f"pairs: x={x} pairs need {x} distinct ranks but the job has {n}")
            _room(len(flows), p * x, spec)
            out = _outside(topology, placement)
            ranks = rng.choice(n, size=x, replace=False)
            hosts = rng.choice(out, size=x, replace=x > out.size)
            for r, h in zip(ranks.tolist(), hosts.tolist()):
                pair = (int(placement[r]), h) if spec.direction == "out" else (h, int(placement[r]))
                flows += [pair] * p
        else:
            raise BackgroundError(f"background: unknown spec {spec!r}")
    for s, d in flows + [(b.src, b.dst) for b in bulks]:
        if s == d:
            raise BackgroundError(f"background: a flow from host {topology.hosts[s]!r} to itself")
    return flows, bulks


# ------------------------------------------------------------------ text forms
def _kv(parts: Sequence[str], spec: str, allowed: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in parts:
        for item in filter(None, part.split(",")):
            k, eq, v = item.partition("=")
            k = k.strip().lower()
            if not eq or not v.strip():
                raise BackgroundError(f"{spec!r}: expected KEY=VALUE, got {item!r}")
            if k not in allowed:
                raise BackgroundError(f"{spec!r}: unknown field {k!r}; allowed: {', '.join(sorted(allowed))}")
            if k in out:
                raise BackgroundError(f"{spec!r}: field {k!r} given twice")
            out[k] = v.strip()
    return out


def _int(value: str, field: str, spec: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise BackgroundError(f"{spec!r}: field {field!r} must be an integer, got {value!r}") from None


def _host(value: str, placement: np.ndarray | None, spec: str, field: str) -> HostRef:
    """``h12`` (host name), ``12`` (host id) or ``r3`` (the host of job rank 3)."""
    v = value.strip()
    if v[:1].lower() == "r" and v[1:].isdigit():
        r = int(v[1:])
        if placement is None or not 0 <= r < len(placement):
            raise BackgroundError(f"{spec!r}: field {field!r}: no job rank {r}")
        return int(placement[r])
    return int(v) if v.isdigit() else v


def parse_background(spec: str, placement: np.ndarray | None = None) -> Background:
    """One background spec from text.

    Forms: ``into:3:p=2`` (p flows into rank 3; ``into:3,5:p=1`` for several ranks),
    ``out:3:p=1``, ``pairs:x=4:p=2[:dir=in]``, ``flow:src=h12,dst=r3[,count=2]``
    (long-lived between hosts; ``rN`` = the host of rank N),
    ``bulk:src=h12,dst=h3,bytes=5MB,period=2ms[,phase=0.5ms]`` (5 MB every 2 ms offers 20 Gbps; at
    resolve time the offered rate must be below the path's smallest capacity).

    Raises:
        BackgroundError: naming the bad kind or field.
    """
    text = str(spec).strip()
    kind, _, rest = text.partition(":")
    kind = kind.lower()
    parts = rest.split(":") if rest else []
    try:
        if kind in ("into", "out"):
            if not parts or "=" in parts[0]:
                raise BackgroundError(f"{text!r}: give the ranks first, e.g. {kind}:3:p=2")
            ranks = tuple(_int(r, "ranks", text) for r in parts[0].split(",") if r.strip())
            if not ranks:
                raise BackgroundError(f"{text!r}: no ranks given, e.g. {kind}:3:p=2")
            kv = _kv(parts[1:], text, {"p"})
            p = _int(kv.get("p", "1"), "p", text)
            return IntoRanks(ranks, p) if kind == "into" else OutOfRanks(ranks, p)
        if kind == "pairs":
            kv = _kv(parts, text, {"x", "p", "dir"})
            if "x" not in kv:
                raise BackgroundError(f"{text!r}: missing field 'x' (e.g. pairs:x=4:p=2)")
            return RandomPairs(_int(kv["x"], "x", text), _int(kv.get("p", "1"), "p", text),
                               kv.get("dir", "out").lower())
        if kind in ("flow", "bulk"):
            allowed = {"src", "dst", "count"} if kind == "flow" else {"src", "dst", "bytes", "period", "phase"}
            kv = _kv(parts, text, allowed)
            need = ["src", "dst"] + (["bytes", "period"] if kind == "bulk" else [])
            for f in need:
                if f not in kv:
                    raise BackgroundError(f"{text!r}: missing field {f!r}")
            src, dst = _host(kv["src"], placement, text, "src"), _host(kv["dst"], placement, text, "dst")
            if kind == "flow":
                return LongLived(src, dst, _int(kv.get("count", "1"), "count", text))
            phase = parse_time(kv["phase"], "phase") if "phase" in kv else 0.0
            return Bulk(src, dst, parse_size(kv["bytes"], "bytes"), parse_time(kv["period"], "period"), phase)
    except UnitError as exc:
        raise BackgroundError(f"{text!r}: {exc}") from None
    raise BackgroundError(f"{text!r}: unknown background kind {kind!r}; expected into, out, pairs, flow or bulk")


def _degrade(topology: Topology, links: Iterable[int], rate: float, spec: str) -> dict[int, float]:
    """``{link: rate}`` after checking 0 < rate <= each link's capacity (degrading never raises one)."""
    rate = float(rate)
    links = [int(l) for l in links]
    if not (np.isfinite(rate) and rate > 0):
        raise BackgroundError(f"{spec}: rate must be > 0 bit/s, got {rate:g}")
    for l in links:
        cap = float(topology.capacity[l])
        if rate > cap:
            raise BackgroundError(f"{spec}: rate {rate / 1e9:g} Gbps is above link {l} "
                                  f"({topology.describe_link(l)}) capacity {cap / 1e9:g} Gbps; "
                                  "a degrade can only lower a capacity")
    return {l: rate for l in links}


def random_degrade(topology: Topology, k: int, rate: float, seed: int = 0) -> dict[int, float]:
    """``k`` random cables (both directions) set to ``rate`` bit/s (REACT §7.3.4: gray failures
    anywhere in the fabric). Draws with ``numpy.random.default_rng([seed, 2])`` from
    :meth:`~reactccl.topology.Topology.network_cables`: every cable, except on a topology of
    servers, where NVLink and PCIe cables are not part of the network and are never drawn.

    Raises:
        BackgroundError: k < 1 or more than the topology's network cables; rate <= 0 or above a
            picked link's capacity.
    """
    cables = topology.network_cables()
    k = _check_p(k, "k", "degrade random")
    if k > len(cables):
        raise BackgroundError(f"degrade: k={k} but {topology.name} has {len(cables)} network cables")
    rng = np.random.default_rng([int(seed), 2])
    pick = cables[np.sort(rng.choice(len(cables), size=k, replace=False))]
    return _degrade(topology, (l for l in pick.reshape(-1).tolist() if l >= 0), rate, f"degrade random:k={k}")


def job_cables(topology: Topology, hosts: Sequence[int] | np.ndarray) -> np.ndarray:
    """Network cables (rows of :meth:`Topology.network_cables`: no NVLink or PCIe cable) on any
    path ECMP may give a flow between two of the job's ``hosts`` (host ids): the cables a degrade
    can hit the job on."""
    used: set[int] = set()
    hosts = [int(h) for h in hosts]
    for s in hosts:
        for d in hosts:
            if s != d:
                used.update(np.unique(np.concatenate(topology.shortest_paths(s, d))).tolist())
    cables = topology.network_cables()
    keep = np.isin(cables[:, 0], list(used)) | np.isin(cables[:, 1], list(used))
    return cables[keep]


def job_degrade(topology: Topology, hosts: Sequence[int] | np.ndarray, k: int, rate: float,
                seed: int = 0) -> dict[int, float]:
    """``k`` random cables (both directions) *on the job's paths* (:func:`job_cables`) set to
    ``rate`` bit/s: a gray failure the job surely meets (``random`` draws from the whole fabric
    and often misses it). Draws with ``numpy.random.default_rng([seed, 3])``.

    Raises:
        BackgroundError: k < 1 or more than the job's cables; a bad rate.
    """
    pool = job_cables(topology, hosts)
    k = _check_p(k, "k")
    if k > len(pool):
        raise BackgroundError(f"degrade job:k={k}: the job's paths use only {len(pool)} cables")
    rng = np.random.default_rng([int(seed), 3])
    pick = pool[np.sort(rng.choice(len(pool), size=k, replace=False))]
    return _degrade(topology, (l for l in pick.reshape(-1).tolist() if l >= 0), rate, f"degrade job:k={k}")


def parse_degrade(spec: str, topology: Topology, seed: int = 0,
                  hosts: Sequence[int] | np.ndarray | None = None) -> dict[int, float]:
    """Degraded links from text. The forms:

    * ``random:k=2:rate=30G`` -- k random *cables*, both directions (REACT §7.3.4); on a topology
      of servers only NIC and fabric cables are drawn (:func:`random_degrade`);
    * ``job:k=1:rate=30G`` -- k random network cables on the job's paths (needs ``hosts``, the
      job's host ids; :func:`job_degrade`);
    * ``cable=5:rate=30G`` -- cable 5, both directions (``cable=5,7`` for several);
    * ``link=12:rate=30G`` -- the one *directed* link 12 only (``link=12,13`` for several); a link
      may also be named by its ends, ``link=s0nic1->r1l0:rate=100G``;
    * ``nic:server=2,nic=1,rate=100G`` -- both directions of NIC 1 of server 2's fabric cable
      (a topology of servers only).

    Cable ids are rows of :meth:`Topology.cables`; ``reactccl simulate --list-links`` prints
    every link with its cable and kind. The rate must be > 0 and at most the link's capacity.

    Returns:
        ``{link_id: bit/s}`` for :meth:`Topology.degraded`.

    Raises:
        BackgroundError: naming the bad field, an unknown id, or a rate above a link's capacity.
    """
    text = str(spec).strip()
    parts = text.split(":")
    try:
        if parts[0].lower() == "random":
            kv = _kv(parts[1:], text, {"k", "rate"})
            for f in ("k", "rate"):
                if f not in kv:
                    raise BackgroundError(f"{text!r}: missing field {f!r} (e.g. random:k=2:rate=30G)")
            return random_degrade(topology, _int(kv["k"], "k", text), parse_rate(kv["rate"]), seed)
        if parts[0].lower() == "job":
            kv = _kv(parts[1:], text, {"k", "rate"})
            for f in ("k", "rate"):
                if f not in kv:
                    raise BackgroundError(f"{text!r}: missing field {f!r} (e.g. job:k=1:rate=30G)")
            if hosts is None:
                raise BackgroundError(f"{text!r}: 'job' draws from the job's paths and needs its hosts")
            return job_degrade(topology, hosts, _int(kv["k"], "k", text), parse_rate(kv["rate"]), seed)
        if parts[0].lower() == "nic":
            return _nic_degrade(topology, _kv(parts[1:], text, {"server", "nic", "rate"}), text)
        kv = _kv([p.replace(",", ";") if p.lower().startswith(("link=", "cable=")) else p for p in parts], text,
                 {"link", "cable", "rate"})
        if ("link" in kv) == ("cable" in kv) or "rate" not in kv:
            raise BackgroundError(f"{text!r}: expected random:k=K:rate=R, job:k=K:rate=R, cable=ID:rate=R, "
                                  "link=ID:rate=R (or link=U->V:rate=R) or nic:server=S,nic=K,rate=R")
        field = "link" if "link" in kv else "cable"
        cables = topology.cables()
        count = topology.num_links if field == "link" else len(cables)
        links: list[int] = []
        for item in kv[field].split(";"):
            if field == "link" and "->" in item:
                u, _, v = item.partition("->")
                links.append(topology.link_id(u.strip(), v.strip()))
                continue
            i = _int(item, field, text)
            if not 0 <= i < count:
                raise BackgroundError(f"{text!r}: field {field!r}: id {i} out of range 0..{count - 1}")
            links += [i] if field == "link" else [l for l in cables[i].tolist() if l >= 0]
        return _degrade(topology, links, parse_rate(kv["rate"]), repr(text))
    except (UnitError, TopologyError) as exc:
        raise BackgroundError(f"{text!r}: {exc}") from None


def _nic_degrade(topology: Topology, kv: Mapping[str, str], text: str) -> dict[int, float]:
    """``nic:server=S,nic=K,rate=R``: both links of NIC K of server S's fabric cable."""
    layout = topology.servers
    if layout is None:
        raise BackgroundError(f"{text!r}: {topology.name} has no servers (a nic: degrade needs rail:... or gpus=)")
    for f in ("server", "nic", "rate"):
        if f not in kv:
            raise BackgroundError(f"{text!r}: missing field {f!r} (e.g. nic:server=0,nic=1,rate=100G)")
    s, k = _int(kv["server"], "server", text), _int(kv["nic"], "nic", text)
    if not 0 <= s < layout.S:
        raise BackgroundError(f"{text!r}: field 'server': {s} out of range 0..{layout.S - 1}")
    if not 0 <= k < layout.K:
        raise BackgroundError(f"{text!r}: field 'nic': {k} out of range 0..{layout.K - 1} (NICs per server)")
    return _degrade(topology, (int(layout.nic_up[s, k]), int(layout.nic_down[s, k])), parse_rate(kv["rate"]),
                    repr(text))


def degrade_rates(topology: Topology, degrade: Mapping[int, float] | str | Sequence[str] | None,
                  seed: int = 0, hosts: Sequence[int] | np.ndarray | None = None) -> dict[int, float]:
    """``{link_id: bit/s}`` from a mapping or from degrade specs (spec ``i`` drawn with ``seed + i``;
    ``hosts``, the job's host ids, for ``job:`` specs that draw from the job's own cables).

    Raises:
        BackgroundError: a bad spec (see :func:`parse_degrade`).
    """
    if degrade is None or isinstance(degrade, Mapping):
        return dict(degrade or {})
    specs = [degrade] if isinstance(degrade, str) else list(degrade)
    rates: dict[int, float] = {}
    for i, spec in enumerate(specs):
        rates.update(parse_degrade(spec, topology, seed=seed + i, hosts=hosts))
    return rates


class ResolvedBackground:
    """The background a network resolved at its first epoch, read back (a mixin of
    :class:`reactccl.netsim.SimulatedNetwork` and :class:`reactccl.packetsim.PacketNetwork`, which keep
    it as ``self._resolved = (long_lived, bulks)``, None before the first epoch)."""

    _resolved: tuple | None = None

    @property
    def long_lived(self) -> list[tuple[int, int]]:
        """Resolved long-lived background flows as ``(src_host, dst_host)`` (after the first epoch)."""
        return [] if self._resolved is None else list(self._resolved[0])

    @property
    def bulks(self) -> list[Bulk]:
        """Resolved bulk sources with host ids (after the first epoch)."""
        return [] if self._resolved is None else list(self._resolved[1])

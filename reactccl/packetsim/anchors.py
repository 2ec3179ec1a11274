"""The five packet-level reference scenarios (``shared/reference/ns3-anchors.md``), rebuilt.

Each scenario is a set of flows on a star of 100 Gb/s, 2 µs links (host to host 4 µs) with start
dependencies ("a flow starts at the instant its last dependency is done"), long-lived background
flows and the measured quantity. :func:`run_packet` runs one on :class:`~.network.PacketNetwork`
(fresh connection per flow, opened at t = 0, collective at t0 = 1000 µs), :func:`run_fluid` on the
flow-level engine, and :func:`reference` reads the measured ns-3 times shipped with the tests.

Scenarios: ``react43_a`` (reduce phase of NCCL's double binary tree, 16 ranks of an 18-host star,
1 MB per flow), ``react43_b`` (plus two long-lived flows into rank 3), ``react43_c`` (b with ranks
2 and 3 swapped in tree 1), ``ring8`` (ring AllReduce, 8 hosts, 20 MB in 2.5 MB chunks, 14 steps),
``incast`` (hosts 1-7 send 2 MB each to host 0).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..netsim import FluidEngine
from ..topology import Topology, star
from ..traffic import LongLived
from .network import PacketNetwork

__all__ = ["Anchor", "ANCHORS", "anchor", "run_packet", "run_fluid", "reference", "REFERENCE_FILE"]

#: The measured times (a copy of shared/reference/ns3_anchor_results.json).
REFERENCE_FILE = Path(__file__).resolve().parents[2] / "tests" / "data" / "ns3_anchor_results.json"

TREE0 = (-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 14, 12, 14)
TREE1 = (1, 3, 1, 7, 5, 3, 5, 15, 9, 11, 9, 7, 13, 11, 13, -1)


@dataclass(frozen=True)
class Anchor:
    """One reference scenario: flows (host ids), bytes, parents per flow, background, the star.

    Attributes:
        name: scenario name.
        hosts: hosts on the star.
        src, dst, nbytes: per flow, shape ``(F,)``.
        parents: per flow, the flows it waits for.
        labels: ``"T0:1->2"`` style names (the reference's keys).
        background: long-lived flows ``(src host, dst host)``.
    """

    name: str
    hosts: int
    src: tuple[int, ...]
    dst: tuple[int, ...]
    nbytes: tuple[float, ...]
    parents: tuple[tuple[int, ...], ...]
    labels: tuple[str, ...]
    background: tuple[tuple[int, int], ...] = ()

    def topology(self) -> Topology:
        """The star: 100 Gb/s, 2 µs per link."""
        return star(self.hosts, 100e9, 2e-6)

    def parent_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """Parents as CSR ``(ptr (F+1,), parent (E,))``."""
        ptr = np.zeros(len(self.src) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in self.parents], out=ptr[1:])
        flat = [q for p in self.parents for q in p]
        return ptr, np.asarray(flat, dtype=np.int64)


def _reduce_trees(name: str, trees: tuple[tuple[int, ...], ...], background=()) -> Anchor:
    src, dst, labels, parents = [], [], [], []
    for t, par in enumerate(trees):
        index = {}
        for r, p in enumerate(par):
            if p >= 0:
                index[r] = len(src)
                src.append(r)
                dst.append(p)
                labels.append(f"T{t}:{r}->{p}")
                parents.append([])
        for child, p in enumerate(par):  # a rank sends to its parent once all its children have arrived
            if p >= 0 and p in index:
                parents[index[p]].append(index[child])
    return Anchor(name, 18, tuple(src), tuple(dst), (1e6,) * len(src), tuple(tuple(sorted(p)) for p in parents),
                  tuple(labels), tuple(background))


def _swap23(par: tuple[int, ...]) -> tuple[int, ...]:
    relabel = {2: 3, 3: 2}
    out = [0] * len(par)
    for r, p in enumerate(par):
        out[relabel.get(r, r)] = relabel.get(p, p) if p >= 0 else -1
    return tuple(out)


def _ring8() -> Anchor:
    n, steps = 8, 14
    src, dst, parents, labels = [], [], [], []
    for k in range(steps):
        for r in range(n):
            src.append(r)
            dst.append((r + 1) % n)
            labels.append(f"s{k}:{r}->{(r + 1) % n}")
            parents.append(((k - 1) * n + (r - 1) % n,) if k else ())
    return Anchor("ring8", 8, tuple(src), tuple(dst), (2.5e6,) * len(src), tuple(parents), tuple(labels))


def _incast() -> Anchor:
    return Anchor("incast", 8, tuple(range(1, 8)), (0,) * 7, (2e6,) * 7, ((),) * 7,
                  tuple(f"{h}->0" for h in range(1, 8)))


_BG = ((16, 3), (17, 3))
ANCHORS: dict[str, Anchor] = {a.name: a for a in (
    _reduce_trees("react43_a", (TREE0, TREE1)),
    _reduce_trees("react43_b", (TREE0, TREE1), _BG),
    _reduce_trees("react43_c", (TREE0, _swap23(TREE1)), _BG),
    _ring8(),
    _incast(),
)}


def anchor(name: str) -> Anchor:
    """The scenario called ``name``.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    try:
        return ANCHORS[name]
    except KeyError:
        raise KeyError(f"unknown anchor scenario {name!r}; known: {', '.join(ANCHORS)}") from None


def run_packet(name: str, transport: str = "dctcp_red") -> dict:
    """Run scenario ``name`` on ns-3 with the reference's settings (fresh connections opened at t = 0,
    collective at t0 = 1000 µs, background from t = 0, RNG run 1).

    Returns:
        ``{"time_s": the scenario's time (last flow delivered, from t0), "fct_s": {label: FCT},
        "wall_s", "packets", "events"}``.

    Raises:
        PacketSimUnavailable: ns-3 is not installed.
    """
    a = anchor(name)
    topo = a.topology()
    net = PacketNetwork(topo, transport, background=[LongLived(s, d) for s, d in a.background],
                        ecmp_ports=1, connections="fresh", warmup=1e-3, rng_run=1)
    net._background(np.arange(len(a.src)))  # noqa: SLF001 - start background at t = 0 with the connections
    src, dst = np.asarray(a.src), np.asarray(a.dst)
    paths = [topo.ecmp_path(s, d, (0, f, 0)) for f, (s, d) in enumerate(zip(a.src, a.dst))]
    ptr, par = a.parent_csr()
    start, end, stats = net.run_flows(src, dst, np.asarray(a.nbytes), ptr, par,
                                      [("anchor", f) for f in range(len(src))], paths, a.labels)
    return {"time_s": float(end.max()), "fct_s": dict(zip(a.labels, (end - start).tolist())), **stats}


def run_fluid(name: str) -> dict:
    """Run scenario ``name`` on the flow-level max-min engine (:class:`reactccl.netsim.FluidEngine`).

    Returns:
        ``{"time_s", "fct_s": {label: FCT}}``.
    """
    a = anchor(name)
    topo = a.topology()
    F = len(a.src)
    paths = [tuple(topo.ecmp_path(s, d, (0, f, 0)).tolist()) for f, (s, d) in enumerate(zip(a.src, a.dst))]
    children: list[list[int]] = [[] for _ in range(F)]
    for f, ps in enumerate(a.parents):
        for p in ps:
            children[p].append(f)
    eng = FluidEngine(topo.capacity)
    eng.add_flows(paths, a.nbytes, [topo.path_latency(p) for p in paths], [len(p) for p in a.parents], children,
                  [0.0] * F, watched=True)
    if a.background:
        bg = [tuple(topo.ecmp_path(s, d, (-1, i, 0)).tolist()) for i, (s, d) in enumerate(a.background)]
        k = len(bg)
        eng.add_flows(bg, [np.inf] * k, [topo.path_latency(p) for p in bg], [0] * k, [()] * k, [0.0] * k, watched=False)
    eng.run()
    start, end = np.array(eng.start[:F]), np.array(eng.end[:F])
    return {"time_s": float(end.max()), "fct_s": dict(zip(a.labels, (end - start).tolist()))}


def reference(path: str | Path | None = None) -> dict:
    """The measured reference document (``scenarios -> {fluid_maxmin_us, ns3_us: {config: µs}, ...}``)."""
    return json.loads(Path(path or REFERENCE_FILE).read_text())

"""Multi-GPU servers in a topology: the layout a servers topology carries, and its routing.

A *server* is G GPUs, one NVSwitch and K NICs. Every GPU is a host (``kind="host"``), so rank ->
host placement, traces and background work as on a flat topology; the NVSwitch and the NICs are
switches. Cables (two directed links each): GPU <-> NVSwitch (NVLink, ``nvlink`` bit/s per GPU per
direction), GPU <-> its own NIC (PCIe, ``pcie`` bit/s; GPU ``j`` uses NIC ``j*K//G``), NIC <->
a fabric switch (the NIC's rate). Names: GPU ``s{server}g{local}``, NVSwitch ``s{server}nvs``,
NIC ``s{server}nic{k}``, storage hosts ``st{i}``. The builders are in :mod:`.server_fabrics`.

Routing (NCCL's data paths; BASELINES.md "Servers", NCCL ``src/graph/paths.cc`` for PXN), for a
flow from host ``s`` to host ``d``:

* same server: GPU -> NVSwitch -> GPU (two NVLink links, one path);
* different servers: out through a NIC of the source server, in through the destination GPU's
  own NIC (NIC -> GPU over PCIe). With PXN (``pxn=True``) the source NIC is the one on the
  destination GPU's rail (the NIC with the destination's NIC index); a sender not attached to
  that NIC first moves the data over NVLink to the GPU of its server with the destination's local
  index, which sends it (GPU -> NVSwitch -> proxy GPU -> NIC). Without PXN, or towards a storage
  host, the sender's own NIC. Between the two NICs: every fewest-hop path over fabric links only
  (NIC and switch-to-switch cables; never through a GPU or an NVSwitch), among which ECMP hashes
  ``(src, dst, job, flow, port)`` as on any topology;
* a storage host (not a GPU) is its own fabric end.

So background into a rank enters by that rank's NIC, on the same fabric -> NIC link as the job's
inter-server traffic into it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from .graph import Topology, TopologyError
from .paths import FewestHops, nx_fewest_hop_paths

__all__ = ["ServerLayout", "LINK_KINDS", "DEFAULT_NVLINK", "DEFAULT_PCIE", "DEFAULT_NIC_RATE"]

DEFAULT_NVLINK = 3.6e12   # bit/s per GPU per direction: 450 GB/s, NVLink 4 on an H100-class server
DEFAULT_PCIE = 512e9      # bit/s: 64 GB/s, PCIe Gen5 x16 per direction
DEFAULT_NIC_RATE = 400e9  # bit/s: one 400 Gb/s NIC per GPU on a rail-optimized fabric

#: Link kinds, indexed by :attr:`ServerLayout.link_kind`.
LINK_KINDS = ("fabric", "nic", "pcie", "nvlink")
FABRIC, NIC, PCIE, NVLINK = range(4)


def _frozen(a, dtype=np.int64) -> np.ndarray:
    out = np.array(a, dtype=dtype)
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class ServerLayout:
    """Where the servers are in a topology: S servers of G GPUs and K NICs (``topology.servers``).

    Attributes:
        S, G, K: servers, GPUs per server, NICs per server.
        nvlink, pcie, nic_rate: link rates in bit/s (per direction).
        pxn: whether inter-server flows leave by the NIC on the destination's rail (module docstring).
        server_of_host, local_of_host: per host, shape ``(H,)``; -1 for hosts that are not GPUs
            (storage).
        gpu_host: host id of GPU ``(server, local)``, shape ``(S, G)``.
        nvswitch: node id (index into ``topology.nodes``) of each server's NVSwitch, shape ``(S,)``.
        nic_node: node id of NIC ``(server, k)``, shape ``(S, K)``.
        nic_of_local: the NIC index of local GPU ``j``, ``j*K//G``, shape ``(G,)``.
        rail: rail of NIC ``(server, k)``, shape ``(S, K)`` (``k`` on a rail fabric; the NIC index
            on a builder's slot).
        nvlink_up, nvlink_down: link ids GPU -> NVSwitch and NVSwitch -> GPU, shape ``(S, G)``.
        pcie_up, pcie_down: link ids GPU -> its NIC and that NIC -> GPU, shape ``(S, G)``.
        nic_up, nic_down: link ids NIC -> fabric switch and fabric switch -> NIC, shape ``(S, K)``.
        link_kind: per link an index into :data:`LINK_KINDS`, shape ``(L,)``.
    """

    S: int
    G: int
    K: int
    nvlink: float
    pcie: float
    nic_rate: float
    pxn: bool
    server_of_host: np.ndarray
    local_of_host: np.ndarray
    gpu_host: np.ndarray
    nvswitch: np.ndarray
    nic_node: np.ndarray
    nic_of_local: np.ndarray
    rail: np.ndarray
    nvlink_up: np.ndarray
    nvlink_down: np.ndarray
    pcie_up: np.ndarray
    pcie_down: np.ndarray
    nic_up: np.ndarray
    nic_down: np.ndarray
    link_kind: np.ndarray
    _fabric: dict = field(default_factory=dict, repr=False)   # lazily built path finders over the fabric

    @classmethod
    def from_names(cls, topology: Topology, S: int, G: int, K: int, *, nvlink: float, pcie: float,
                   nic_rate: float, pxn: bool, rail: np.ndarray | None = None) -> ServerLayout:
        """The layout of a topology its builder named as in the module docstring (the one place
        names are read; everything else reads the layout's arrays).

        Raises:
            TopologyError: a GPU, NVSwitch, NIC or cable missing from ``topology``.
        """
        node = {n: i for i, n in enumerate(topology.nodes)}
        H, L = topology.num_hosts, topology.num_links

        def nid(name: str) -> int:
            if name not in node:
                raise TopologyError(f"{topology.name}: server node {name!r} missing")
            return node[name]

        server_of_host = np.full(H, -1, dtype=np.int64)
        local_of_host = np.full(H, -1, dtype=np.int64)
        gpu_host = np.empty((S, G), dtype=np.int64)
        nic_of_local = np.arange(G, dtype=np.int64) * K // G
        link = topology.link_id
        arrays = {k: np.empty((S, G), dtype=np.int64) for k in ("nvlink_up", "nvlink_down", "pcie_up", "pcie_down")}
        nic_up, nic_down = np.empty((S, K), dtype=np.int64), np.empty((S, K), dtype=np.int64)
        nic_node = np.empty((S, K), dtype=np.int64)
        nvswitch = np.array([nid(f"s{s}nvs") for s in range(S)], dtype=np.int64)
        for s in range(S):
            for k in range(K):
                nic = f"s{s}nic{k}"
                nic_node[s, k] = nid(nic)
                fabric = [v for v in topology.graph.successors(nic) if topology.graph.nodes[v]["kind"] != "host"]
                if len(fabric) != 1:
                    raise TopologyError(f"{topology.name}: NIC {nic!r} needs one fabric cable, has {len(fabric)}")
                nic_up[s, k], nic_down[s, k] = link(nic, fabric[0]), link(fabric[0], nic)
            for j in range(G):
                gpu = f"s{s}g{j}"
                h = topology.host_id(gpu)
                gpu_host[s, j], server_of_host[h], local_of_host[h] = h, s, j
                nic = f"s{s}nic{nic_of_local[j]}"
                arrays["nvlink_up"][s, j], arrays["nvlink_down"][s, j] = link(gpu, f"s{s}nvs"), link(f"s{s}nvs", gpu)
                arrays["pcie_up"][s, j], arrays["pcie_down"][s, j] = link(gpu, nic), link(nic, gpu)
        kind = np.full(L, FABRIC, dtype=np.int8)
        kind[np.r_[nic_up.ravel(), nic_down.ravel()]] = NIC
        kind[np.r_[arrays["pcie_up"].ravel(), arrays["pcie_down"].ravel()]] = PCIE
        kind[np.r_[arrays["nvlink_up"].ravel(), arrays["nvlink_down"].ravel()]] = NVLINK
        rails = np.tile(np.arange(K), (S, 1)) if rail is None else rail
        return cls(S=int(S), G=int(G), K=int(K), nvlink=float(nvlink), pcie=float(pcie), nic_rate=float(nic_rate),
                   pxn=bool(pxn), server_of_host=_frozen(server_of_host), local_of_host=_frozen(local_of_host),
                   gpu_host=_frozen(gpu_host), nvswitch=_frozen(nvswitch), nic_node=_frozen(nic_node),
                   nic_of_local=_frozen(nic_of_local), rail=_frozen(rails),
                   nvlink_up=_frozen(arrays["nvlink_up"]), nvlink_down=_frozen(arrays["nvlink_down"]),
                   pcie_up=_frozen(arrays["pcie_up"]), pcie_down=_frozen(arrays["pcie_down"]),
                   nic_up=_frozen(nic_up), nic_down=_frozen(nic_down), link_kind=_frozen(kind, np.int8))

    # ------------------------------------------------------------------ facts
    @property
    def num_gpus(self) -> int:
        """S x G."""
        return self.S * self.G

    def link_kind_names(self) -> np.ndarray:
        """:attr:`link_kind` as names from :data:`LINK_KINDS`, shape ``(L,)`` of str."""
        return np.array(LINK_KINDS)[self.link_kind]

    def fabric_links(self) -> np.ndarray:
        """Link ids of the network proper (NIC and fabric links; no NVLink, no PCIe), sorted."""
        return np.flatnonzero(self.link_kind <= NIC)

    def nic_of_host(self, host: int) -> tuple[int, int]:
        """``(server, k)``: the NIC a GPU host's inter-server traffic arrives by (its own NIC).

        Raises:
            ValueError: ``host`` is not a GPU.
        """
        s = int(self.server_of_host[host])
        if s < 0:
            raise ValueError(f"host {host} is not a GPU of a server")
        return s, int(self.nic_of_local[self.local_of_host[host]])

    def flow_nics(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The NICs the routing sends flows ``src[i] -> dst[i]`` (host ids, shape ``(F,)``) out of
        and into, as flat NIC ids ``server * K + k``, each shape ``(F,)``; -1 where the flow does
        not use one (inside a server, or the end is a storage host). Out: with PXN the NIC on the
        destination's rail, else the sender's own; in: the destination GPU's own NIC (the module
        docstring). What detection groups FCT evidence by."""
        src = np.asarray(src, dtype=np.int64).reshape(-1)
        dst = np.asarray(dst, dtype=np.int64).reshape(-1)
        ss, sd = self.server_of_host[src], self.server_of_host[dst]
        ls, ld = self.local_of_host[src], self.local_of_host[dst]
        inter = (ss != sd) | (ss < 0)
        own_s, own_d = self.nic_of_local[np.maximum(ls, 0)], self.nic_of_local[np.maximum(ld, 0)]
        k_out = np.where(self.pxn & (sd >= 0), own_d, own_s)
        out = np.where(inter & (ss >= 0), ss * self.K + k_out, -1)
        into = np.where(inter & (sd >= 0), sd * self.K + own_d, -1)
        return out, into

    # ---------------------------------------------------------------- routing
    def _finder(self, topology: Topology) -> FewestHops:
        hops = self._fabric.get("fast")
        if hops is None:
            hops = self._fabric["fast"] = FewestHops(len(topology.nodes), topology.link_src, topology.link_dst,
                                                     self.fabric_links())
        return hops

    def _fabric_graph(self, topology: Topology) -> nx.DiGraph:
        g = self._fabric.get("graph")
        if g is None:
            g = self._fabric["graph"] = topology.graph.edge_subgraph(
                [(topology.nodes[topology.link_src[lk]], topology.nodes[topology.link_dst[lk]])
                 for lk in self.fabric_links().tolist()])
        return g

    def path_tables(self, topology: Topology, src: np.ndarray, dst: np.ndarray,
                    reference: bool = False, preds: dict | None = None) -> list[np.ndarray | None]:
        """The paths of host pairs ``(src[i], dst[i])`` under this layout's routing (module
        docstring): per pair an int64 array ``(m, hops)`` of link ids, rows sorted, read-only
        (None where the fabric joins no path). ``reference=True`` finds the fabric part with
        networkx (:func:`~.paths.nx_fewest_hop_paths`) instead of :class:`~.paths.FewestHops`,
        keeping each source's predecessor lists in ``preds`` if given (the old per-source cache)."""
        src = np.asarray(src, dtype=np.int64).reshape(-1)
        dst = np.asarray(dst, dtype=np.int64).reshape(-1)
        host_node = topology._host_node
        out: list[np.ndarray | None] = [None] * len(src)
        heads: list[list[int]] = []
        tails: list[list[int]] = []
        ends: list[tuple[int, int]] = []
        inter: list[int] = []
        for i, (s, d) in enumerate(zip(src.tolist(), dst.tolist(), strict=True)):
            ss, sd = int(self.server_of_host[s]), int(self.server_of_host[d])
            ls, ld = int(self.local_of_host[s]), int(self.local_of_host[d])
            if s == d:
                out[i] = _frozen(np.zeros((1, 0)))
                continue
            if ss >= 0 and ss == sd:
                out[i] = _frozen([[self.nvlink_up[ss, ls], self.nvlink_down[sd, ld]]])
                continue
            head: list[int] = []
            if ss < 0:
                a = int(host_node[s])
            else:
                own = int(self.nic_of_local[ls])
                k = int(self.nic_of_local[ld]) if self.pxn and sd >= 0 else own
                if k != own:   # PXN: over NVLink to the GPU next to NIC k, which sends
                    head = [int(self.nvlink_up[ss, ls]), int(self.nvlink_down[ss, ld]), int(self.pcie_up[ss, ld])]
                else:
                    head = [int(self.pcie_up[ss, ls])]
                a = int(self.nic_node[ss, k])
            if sd < 0:
                b, tail = int(host_node[d]), []
            else:
                b, tail = int(self.nic_node[sd, self.nic_of_local[ld]]), [int(self.pcie_down[sd, ld])]
            heads.append(head)
            tails.append(tail)
            ends.append((a, b))
            inter.append(i)
        if not inter:
            return out
        pairs = np.array(ends, dtype=np.int64)
        if reference:
            g, link_of = self._fabric_graph(topology), topology._link_of
            fabric = []
            for a, b in pairs.tolist():
                na, nb = topology.nodes[a], topology.nodes[b]
                if na not in g or nb not in g:
                    fabric.append(None)
                    continue
                pred = None
                if preds is not None:
                    pred = preds.get(na)
                    if pred is None:
                        pred = preds[na] = nx.predecessor(g, na)
                fabric.append(nx_fewest_hop_paths(g, link_of, na, nb, pred))
        else:
            fabric = self._finder(topology).tables(pairs[:, 0], pairs[:, 1])
        for i, head, tail, table in zip(inter, heads, tails, fabric, strict=True):
            if table is None:
                continue
            m = len(table)
            full = np.hstack([np.broadcast_to(np.array(head, dtype=np.int64), (m, len(head))), table,
                              np.broadcast_to(np.array(tail, dtype=np.int64), (m, len(tail)))])
            out[i] = _frozen(full)
        return out

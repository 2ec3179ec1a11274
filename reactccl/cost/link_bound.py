"""The bandwidth bound of a pattern on a network: no executor finishes an epoch before its busiest
link has carried its bytes. And that bound, in closed form, for NCCL's ring on servers.

Routed on a topology, flow f of a pattern loads every link of its route with its bytes; link l of
capacity ``c_l`` bit/s then needs at least ``8 b_l / c_l`` seconds, whatever the order of flows,
so the epoch takes ``T >= max_l 8 b_l / c_l`` and ``busbw <= S * busbw_factor / max_l (8 b_l /
c_l)`` (S the message). Latency and waiting only add to T: a flow-level simulation reaches the
bound when the busiest link never idles. (A β-only α-β model in which every link, not only a
rank's injection and ejection, is a resource: Hockney's β term summed over the epoch.)

**NCCL's ring on servers** (:mod:`reactccl.algorithms.hier_ring`). S >= 2 servers of G GPUs with K
NICs of ``B_nic`` bytes/s each, NVLink ``B_nv`` bytes/s per GPU per direction, PCIe ``B_pcie``,
C channels, N = S G ranks, message M. In every channel each ring edge carries 2(N-1) flows of
``M / (C N)``, i.e. ``2(N-1)/N * M / C``.

* NICs: channel c's one edge out of a server leaves by NIC ``c mod K`` (PXN: the NIC on the
  receiver's rail, the receiver being the GPU next to NIC ``c mod K``) and its edge into the next
  server enters by that server's NIC ``c mod K``. NIC k carries ``n_k = #{c : c mod K = k}``
  channels each way, so ``T >= max_k n_k * 2(N-1)/N * M / C / B_nic`` and
  ``busbw = M * 2(N-1)/N / T <= C * B_nic / max_k n_k``, which is ``K * B_nic``, the server's NIC
  total, when K divides C (and less otherwise: C = K + 1 puts two channels on NIC 0).
* NVLink: in every channel every GPU sends its 2(N-1) flows over its NVLink up-link: to the next
  GPU of the chain, or, for the chain's last GPU, to the proxy GPU next to the NIC (PXN). Over
  all channels that is ``2(N-1)/N * M`` per GPU, so ``busbw <= B_nv``; each GPU's down-link
  carries as much (the chain's first GPU receives from the network over PCIe, but carries the
  PXN traffic to its NIC instead).
* PCIe: the proxy GPU's link to NIC k carries NIC k's channels: ``busbw <= C * B_pcie / max_k n_k``.

Hence ``busbw <= min(C B_nic, C B_pcie) / max_k n_k`` and ``<= B_nv``: 400 GB/s on an H100-class
server (8 x 400 Gb/s NICs = 400 GB/s < 450 GB/s NVLink < 8 x 64 GB/s PCIe). The flat ring over the
same GPUs (rank order) crosses each server boundary once, always into local GPU 0, so all of it
leaves by NIC 0: ``busbw <= B_nic`` (one NIC's worth, 50 GB/s). With one server only NVLink
counts: ``busbw <= B_nv``.

Source: BASELINES.md "Servers"; NCCL ``src/graph/connect.cc``; nccl-tests' busbw
(``doc/PERFORMANCE.md``: busbw = algbw x 2(n-1)/n for AllReduce).
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern
from ..trace import busbw_factor

__all__ = ["link_bytes", "busbw_bound", "servers_ring_busbw_bound"]


def link_bytes(pattern: CollectivePattern, topology, placement, message_bytes: float, port: int = 0) -> np.ndarray:
    """Bytes every link carries in one epoch of ``pattern`` (module docstring).

    Args:
        pattern: the pattern.
        topology: a :class:`reactccl.topology.Topology` (anything with ``num_links`` and
            ``ecmp_paths``).
        placement: host id of every rank, shape ``(N,)``.
        message_bytes: the message S in bytes.
        port: the ECMP port of every flow; flow f takes the path keyed ``(0, f, port)`` (job 0).
            Fixed-route topologies ignore it.

    Returns:
        Shape ``(L,)`` float64, bytes per link.

    Raises:
        ValueError: ``placement`` not one host per rank.
    """
    place = np.asarray(placement, dtype=np.int64).reshape(-1)
    if len(place) != pattern.num_ranks:
        raise ValueError(f"placement: {len(place)} hosts for {pattern.num_ranks} ranks")
    F = pattern.num_flows
    keys = np.stack([np.zeros(F, np.int64), np.arange(F, dtype=np.int64), np.full(F, port, np.int64)], axis=1)
    ptr, links = topology.ecmp_paths(place[pattern.src], place[pattern.dst], keys)
    per_flow = pattern.flow_bytes(message_bytes)
    return np.bincount(links, weights=np.repeat(per_flow, np.diff(ptr)), minlength=topology.num_links)


def busbw_bound(pattern: CollectivePattern, topology, placement, message_bytes: float,
                port: int = 0) -> tuple[float, int]:
    """The busbw no executor can beat on ``topology`` (module docstring), bytes/s, and the busiest link.

    Returns:
        ``(busbw, link)``: ``S * busbw_factor / max_l (8 b_l / c_l)`` in bytes/s, and the id of
        the link that sets it; ``(inf, -1)`` for a pattern that loads no link.

    Raises:
        ValueError: as :func:`link_bytes`.
    """
    seconds = 8.0 * link_bytes(pattern, topology, placement, message_bytes, port) / np.asarray(topology.capacity)
    if not len(seconds) or seconds.max() <= 0:
        return float("inf"), -1
    busiest = int(np.argmax(seconds))
    return message_bytes * busbw_factor(pattern.collective, pattern.num_ranks) / float(seconds[busiest]), busiest


def servers_ring_busbw_bound(servers: int, nics: int, channels: int, nic_rate: float, nvlink_rate: float,
                             pcie_rate: float = float("inf")) -> float:
    """The closed-form busbw bound of NCCL's ring on servers (module docstring), bytes/s.

    Args:
        servers: S >= 1.
        nics: K >= 1 NICs per server.
        channels: C >= 1 ring channels (channel c on NIC c mod K).
        nic_rate, nvlink_rate, pcie_rate: bit/s per direction: one NIC, one GPU's NVLink, one
            GPU's PCIe link to its NIC.

    Returns:
        ``min(C * nic_rate, C * pcie_rate) / max_k n_k`` and ``nvlink_rate``, the smaller, in
        bytes/s (only ``nvlink_rate`` for one server).

    Raises:
        ValueError: a count below 1 or a rate not > 0.
    """
    for name, v in (("servers", servers), ("nics", nics), ("channels", channels)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
    for name, r in (("nic_rate", nic_rate), ("nvlink_rate", nvlink_rate), ("pcie_rate", pcie_rate)):
        if not r > 0:
            raise ValueError(f"{name}: expected a rate > 0 bit/s, got {r!r}")
    if servers == 1:
        return nvlink_rate / 8
    busiest_nic = -(-int(channels) // int(nics))            # max_k n_k
    return min(channels * min(nic_rate, pcie_rate) / busiest_nic, nvlink_rate) / 8

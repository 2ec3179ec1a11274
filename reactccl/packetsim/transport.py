"""Transport settings by name: TCP variant, queue discipline and their ns-3 attributes.

* ``dctcp`` -- REACT §7.3: DCTCP, RED marking ECN between 32 and 60 packets (queue weight 1, no
  hard drop), 32 MB of buffer per switch port, pure ACKs ahead of data in every queue (a two-band
  priority qdisc), a 2-packet device queue under it so RED sees the queue, and an ACK for every
  segment: with ns-3's delayed ACK (every 2nd segment, else after 200 ms) a persistent connection
  whose window DCTCP has cut to a segment or two at a congested receiver stalls for 200 ms
  (measured: one 1 MB flow of a 2 MB tree took 200.8 ms instead of ~0.7 ms).
* ``dctcp_red`` -- the reference scenarios' DCTCP (``ns3-anchors.md``, ns-3's ``dctcp-example``
  settings): RED thresholds 20/60, 2666-packet (4 MB) limit, queue weight 1, ECN, no hard drop, no
  ACK priority, the device's default 100-packet queue.
* ``default`` -- ns-3 3.44's default TCP (Cubic with HyStart, PRR, SACK, timestamps) over its
  default root qdisc (FqCoDel) and 100-packet device queue.

All three: MSS 1448 (1500-byte packets with timestamps), 4 MB send and receive buffers, initial
window 10 segments, ns-3's default minimum RTO (1 s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Transport", "TRANSPORTS", "get_transport"]


@dataclass(frozen=True)
class Transport:
    """One named transport setting.

    Attributes:
        name: the setting's name.
        tcp: ns-3 TCP type (``""``: ns-3's default, TcpCubic in 3.44).
        qdisc: ``default`` (FqCoDel), ``red`` or ``prio-red`` (ACKs first, data through RED).
        device_queue: packets in each device's drop-tail queue (0: ns-3's 100).
        red: RedQueueDisc attributes (name -> value) when the qdisc uses RED.
        mss, buffer, init_cwnd: bytes, bytes, segments.
        del_ack_count: segments per delayed ACK (ns-3's default 2; ``dctcp`` acks every segment, see
            the module docstring).
    """

    name: str
    tcp: str = ""
    qdisc: str = "default"
    device_queue: int = 0
    red: dict[str, Any] = field(default_factory=dict)
    mss: int = 1448
    buffer: int = 4 * 1024 * 1024
    init_cwnd: int = 10
    del_ack_count: int = 2

    def apply(self, ns: Any) -> None:
        """Set ns-3's attribute defaults for this transport (after ``Config::Reset``)."""
        cfg = ns.Config.SetDefault
        cfg("ns3::TcpSocket::SegmentSize", ns.UintegerValue(self.mss))
        cfg("ns3::TcpSocket::SndBufSize", ns.UintegerValue(self.buffer))
        cfg("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(self.buffer))
        cfg("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(self.init_cwnd))
        cfg("ns3::TcpSocket::DelAckCount", ns.UintegerValue(self.del_ack_count))
        if self.tcp:
            cfg("ns3::TcpL4Protocol::SocketType", ns.StringValue(self.tcp))
        for key, value in self.red.items():
            if isinstance(value, bool):
                v = ns.BooleanValue(value)
            elif key == "MaxSize":
                v = ns.QueueSizeValue(ns.QueueSize(str(value)))
            else:
                v = ns.DoubleValue(float(value)) if isinstance(value, float) else ns.UintegerValue(int(value))
            cfg(f"ns3::RedQueueDisc::{key}", v)

    def describe(self) -> str:
        """One line for reports."""
        tcp = self.tcp.removeprefix("ns3::") or "ns-3 default TCP (Cubic)"
        red = ""
        if self.red:
            red = f", RED {self.red.get('MinTh'):g}/{self.red.get('MaxTh'):g} p, limit {self.red.get('MaxSize')}"
        prio = ", ACKs first" if self.qdisc == "prio-red" else ""
        return f"{self.name}: {tcp}, qdisc {self.qdisc}{red}{prio}"


def _red(min_th: float, max_th: float, limit: str) -> dict[str, Any]:
    return {"UseEcn": True, "UseHardDrop": False, "MeanPktSize": 1500, "MaxSize": limit, "QW": 1.0,
            "MinTh": float(min_th), "MaxTh": float(max_th)}


TRANSPORTS: dict[str, Transport] = {t.name: t for t in (
    Transport("dctcp", "ns3::TcpDctcp", "prio-red", 2, _red(32, 60, f"{32_000_000 // 1500}p"), del_ack_count=1),
    Transport("dctcp_red", "ns3::TcpDctcp", "red", 0, _red(20, 60, "2666p")),
    Transport("default"),
)}


def get_transport(name: str | Transport) -> Transport:
    """The transport called ``name`` (or ``name`` itself when already a :class:`Transport`).

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    if isinstance(name, Transport):
        return name
    try:
        return TRANSPORTS[name]
    except KeyError:
        raise ValueError(f"transport {name!r}: unknown; known: {', '.join(TRANSPORTS)}") from None

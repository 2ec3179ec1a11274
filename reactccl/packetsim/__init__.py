"""Packet-level execution on ns-3 (optional: ``pip install 'reactccl[ns3]'``).

The same executor protocol as :mod:`reactccl.netsim` (``run_epoch(pattern) -> EpochTrace``, and
``run_jobs`` for several jobs), with TCP (DCTCP or ns-3's default), queues and per-packet
forwarding inside ns-3. Importing this package does not import ns-3; building a network does.

See DESIGN.md "Layers": sits beside netsim (knows topologies, patterns, traces and the jobs and
background of :mod:`reactccl.traffic`), not the tuner.
"""

from .deps import START_RULES, child_lists, start_parents
from .native import INSTALL_HINT, PacketSimError, PacketSimUnavailable, available
from .network import CONNECTION_MODES, DEFAULT_TIME_LIMIT, PacketCluster, PacketNetwork
from .replicas import ReplicaCluster, packet_replicas
from .transport import TRANSPORTS, Transport, get_transport

__all__ = [
    "CONNECTION_MODES", "DEFAULT_TIME_LIMIT", "INSTALL_HINT", "PacketCluster", "PacketNetwork", "PacketSimError",
    "PacketSimUnavailable", "ReplicaCluster", "START_RULES", "TRANSPORTS", "Transport", "available", "child_lists", "get_transport",
    "packet_replicas", "start_parents",
]

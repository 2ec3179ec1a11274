"""Network topologies and routing: hosts, switches, directed links (bit/s, s), fewest-hop
paths, ECMP by stable hash, multi-GPU servers (NVLink, NICs, rails, PXN), and placement of
ranks on hosts.

Knows nothing of patterns. See DESIGN.md "Layers".
"""

from .builders import DEFAULT_LATENCY, DEFAULT_RATE, alibaba, fat_tree, full_mesh_tors, leaf_spine, star
from .dragonfly import dragonfly
from .graph import Topology, TopologyError, add_cable, stable_hash
from .server_fabrics import rail, with_servers
from .servers import ServerLayout
from .spec import TOPOLOGIES, parse_topology, placement, register_topology
from .units import UnitError, parse_rate, parse_size, parse_time

__all__ = [
    "DEFAULT_LATENCY", "DEFAULT_RATE", "TOPOLOGIES", "Topology", "TopologyError", "UnitError", "add_cable",
    "alibaba", "dragonfly", "fat_tree", "full_mesh_tors", "leaf_spine", "parse_rate", "parse_size", "parse_time",
    "parse_topology", "placement", "rail", "register_topology", "ServerLayout", "stable_hash", "star",
    "with_servers",
]

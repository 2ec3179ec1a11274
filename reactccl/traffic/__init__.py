"""What runs on a network besides the engine: jobs, background traffic, degraded links, ECMP ports.

The fluid engine (:mod:`reactccl.netsim`) and the packet engine (:mod:`reactccl.packetsim`) take the
same inputs and read them the same way, so both import them from here: :class:`Job` and its checks
(:mod:`.jobs`), background flows and degraded links with their text forms (:mod:`.background`,
REACT §7.1, §7.3), and the seeded ECMP port of every flow and epoch (:mod:`.ecmp`, REACT §7.3).

See DESIGN.md "Layers": knows topologies and patterns; no engine, no tuner.
"""

from .background import (
    Background,
    BackgroundError,
    Bulk,
    IntoRanks,
    LongLived,
    OutOfRanks,
    RandomPairs,
    ResolvedBackground,
    bulk_path,
    degrade_rates,
    job_cables,
    job_degrade,
    parse_background,
    parse_degrade,
    random_degrade,
    resolve_background,
)
from .ecmp import ecmp_ports
from .jobs import Job, check_message_bytes, host_ids

__all__ = [
    "Background", "BackgroundError", "Bulk", "IntoRanks", "Job", "LongLived", "OutOfRanks", "RandomPairs",
    "ResolvedBackground", "bulk_path", "check_message_bytes", "degrade_rates", "ecmp_ports", "host_ids",
    "job_cables", "job_degrade", "parse_background", "parse_degrade", "random_degrade", "resolve_background",
]

"""Flow-level (fluid) network simulation: max-min fair sharing, per-hop latency, data-driven
flow starts, ECMP port choice per epoch, background traffic, degraded links, several jobs.

See DESIGN.md "Layers": knows topologies, patterns and traces, not the tuner.
"""

from .background import (
    BackgroundError, Bulk, IntoRanks, LongLived, OutOfRanks, RandomPairs, parse_background, parse_degrade,
    random_degrade, resolve_background,
)
from .engine import FluidEngine, SimulationError
from .maxmin import max_min_rates
from .network import Job, SimulatedCluster, SimulatedNetwork
from .run import SimulationResult, run_simulation

__all__ = [
    "BackgroundError", "Bulk", "FluidEngine", "IntoRanks", "Job", "LongLived", "OutOfRanks", "RandomPairs",
    "SimulatedCluster", "SimulatedNetwork", "SimulationError", "SimulationResult", "max_min_rates",
    "parse_background", "parse_degrade", "random_degrade", "resolve_background", "run_simulation",
]

"""Flow-level (fluid) network simulation: max-min fair sharing, per-hop latency, ECMP port choice
per epoch, background traffic, degraded links, several jobs.

Execution model (DESIGN.md "The pattern IR", :mod:`reactccl.pattern.order`): a flow starts once its
data has arrived (every earlier flow into its source that touches one of its chunks) and, in step
order (``order="step"``, the default), once its rank's sends of the previous sending step in the same
chunk graph have sent their last byte. Sends of one (rank, chunk graph, step) run together; chunk
graphs run concurrently. ``order="data"`` keeps only the data condition.

Engines: :class:`CompiledEngine` (numba, the default) and :class:`FluidEngine` (pure Python, the
reference); choose with ``engine=`` or ``$REACTCCL_NETSIM_ENGINE``. Sizes beyond what memory or
time allows are refused before work (topology links, pattern flows, background flows).

Jobs, background and degraded links come from :mod:`reactccl.traffic` (re-exported here).
See DESIGN.md "Layers": knows topologies, patterns, traffic and traces, not the tuner.
"""

from ..traffic import (
    BackgroundError,
    Bulk,
    IntoRanks,
    Job,
    LongLived,
    OutOfRanks,
    RandomPairs,
    parse_background,
    parse_degrade,
    random_degrade,
    resolve_background,
)
from .compiled import CompiledEngine
from .maxmin import max_min_rates
from .network import SimulatedCluster, SimulatedNetwork
from .reference import FluidEngine, SimulationError
from .run import SimulationResult, run_simulation

__all__ = [
    "BackgroundError", "Bulk", "CompiledEngine", "FluidEngine", "IntoRanks", "Job", "LongLived", "OutOfRanks",
    "RandomPairs",
    "SimulatedCluster", "SimulatedNetwork", "SimulationError", "SimulationResult", "max_min_rates",
    "parse_background", "parse_degrade", "random_degrade", "resolve_background", "run_simulation",
]

"""Cost models of patterns: the α-β (Hockney) model, per-round link loads, Ψ, Θ, Ω, goodput bound,
the busiest-link busbw bound on a topology.

Knows nothing of executors.
"""

from .alphabeta import AlphaBetaSchedule, alpha_beta_schedule, hockney_step_times, hockney_time  # noqa: E402,F401
from .deficiency import Deficiency, deficiency, link_loads, min_volume, round_times  # noqa: E402,F401
from .link_bound import busbw_bound, link_bytes, servers_ring_busbw_bound  # noqa: E402,F401

"""An emulated cluster on one machine (``reactccl testbed``): network namespaces
joined by a bridge, every link rate-shaped, with external congestion flows and a
torchrun-like launcher. Needs root and iproute2.

    from reactccl.testbed import Testbed
    with Testbed(hosts=4, rate="200mbit") as tb:
        tb.congest(into=2, flows=1)
        result = tb.run(["python", "train.py"], timeout=300)

Design notes and measured facts: issue 4; shaping choices in :mod:`.shaping`.
"""

from .launcher import RunResult, launch, rank_env
from .measure import Transfer, measure_transfers
from .netns import TestbedConfigError, TestbedError, netns_unavailable, require_netns
from .shaping import parse_rate, parse_size
from .state import HOST_IFNAME, TestbedState, check_prefix, known_prefixes, load_state, state_dir
from .testbed import Testbed, orphan_prefixes, sweep_stale

__all__ = ["Testbed", "TestbedError", "TestbedConfigError", "TestbedState", "check_prefix", "state_dir",
           "sweep_stale", "orphan_prefixes", "RunResult", "Transfer", "launch", "rank_env",
           "measure_transfers", "netns_unavailable", "require_netns", "parse_rate", "parse_size",
           "known_prefixes", "load_state", "HOST_IFNAME"]

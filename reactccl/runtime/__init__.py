"""Real execution: patterns as torch.distributed point-to-point collectives (RCollective)
and the REACT control plane (RTuner). The emulated cluster that runs such ranks,
:mod:`reactccl.testbed`, sits above this package.

The layout and record modules are numpy-only; ``RCollective`` and ``RTuner`` need
PyTorch and are imported on first use, so ``import reactccl.runtime`` works
without it.

    from reactccl.runtime import RCollective
    rc = RCollective(pattern)          # after dist.init_process_group("gloo", ...)
    rc(tensor)                         # in place; rc.gather_trace() -> EpochTrace

Servers: ``learn_servers()`` finds which ranks share a host (collective) and ``server_pattern``
builds NCCL's hierarchical ring/tree on that grouping (:mod:`.grouping`).

Source: REACT §6 (RCollective §6.1, RTuner §6.2, §6.3).
"""

import importlib

from .layout import LocalOp, LocalPlan, block_bounds, chunk_bounds, local_plan
from .records import LocalRecord, assemble_trace, merge_traces

__all__ = ["LocalOp", "LocalPlan", "LocalRecord", "RCollective", "RTuner", "FlowTimeoutError",
           "MismatchError", "ControlPlaneError", "assemble_trace", "block_bounds", "chunk_bounds",
           "local_plan", "merge_traces", "pattern_digest", "clock_offset", "run_local", "LocalRunError",
           "RealExecutor", "ServerGrouping", "learn_servers", "plan_servers", "server_pattern"]

_LAZY = {"RCollective": "rcollective", "FlowTimeoutError": "rcollective", "MismatchError": "rcollective",
         "pattern_digest": "rcollective", "RTuner": "rtuner", "ControlPlaneError": "rtuner",
         "clock_offset": "clock", "run_local": "local", "LocalRunError": "local", "RealExecutor": "lockstep",
         "ServerGrouping": "grouping", "learn_servers": "grouping", "plan_servers": "grouping",
         "server_pattern": "grouping"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""REACT's tuner: congestion detection, safe transforms, pruning, critical paths, the estimators
(Algorithm 1's FctModel, the LinkModel of the local search), trial verdicts and the batch
feedback loop (react.md §5, A.2–A.5).

Pure logic on patterns and traces: imports :mod:`reactccl.pattern`, :mod:`reactccl.trace` and
:mod:`reactccl.contract` only, so it drives the simulator and real ranks alike through
``run_epoch(pattern) -> EpochTrace`` (:func:`reactccl.contract.drive`).
"""

from .controller import ReactController
from .detect import Congestion, detect_congestion, noise_floor, throughput_matrix
from .estimate import LinkModel, mean_concurrency
from .steepest import LocalResult, estimated_epoch, local_search
from .equivalence import (
    SwapSet, apply_window_swap, brute_force_viable_swaps, candidate_windows, find_viable_swaps, window_mask,
)
from .log import Decision, DecisionLog
from .params import ReactParams
from .paths import CriticalPath, FctModel, critical_path, path_time
from .run import ReactRun, run_baseline, run_react
from .greedy import (
    Attempt, CongestedNode, SearchResult, apply_transforms, candidate_swaps, congested_nodes, transform_table,
)
from .transforms import DegreeTable, Placement, Swap, Transform, TunerError, ViableSwaps
from .verdict import trial_verdict

__all__ = [
    "Attempt", "CongestedNode", "Congestion", "CriticalPath", "Decision", "DecisionLog", "DegreeTable",
    "FctModel", "LinkModel", "LocalResult", "Placement", "ReactController", "ReactParams", "ReactRun", "SearchResult", "Swap", "SwapSet",
    "Transform", "TunerError", "ViableSwaps", "apply_transforms", "apply_window_swap",
    "brute_force_viable_swaps", "candidate_swaps", "candidate_windows", "congested_nodes", "critical_path",
    "detect_congestion", "find_viable_swaps", "path_time", "run_baseline", "run_react", "throughput_matrix",
    "transform_table", "window_mask", "estimated_epoch", "local_search", "mean_concurrency", "noise_floor",
    "trial_verdict",
]

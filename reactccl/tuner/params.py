"""REACT's parameters (Table 3, A.4), all settable, with the paper's values as defaults."""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ReactParams", "FLUID_MAX_RANKS"]

FLUID_MAX_RANKS = 64   # estimator="auto" estimates max-min sharing up to this many ranks


@dataclass(frozen=True)
class ReactParams:
    """Settings of the REACT feedback loop (react.md Table 3, §5.2, §5.4, §6.3).

    Attributes:
        B: batch size, epochs per decision (§5.4.2; paper 6).
        delta1: steady-congestion threshold δ1 (Eq. 1; 0.2).
        delta2: erratic-congestion threshold δ2 on the normalised std (Eq. 2; 0.15).
        K_t: transforms tried in the first batch (§5.4.1; 15); grows by ``K_growth`` every batch.
        K_growth: increase of K_t after each exploratory batch ("increase it every batch").
        K_max: accepted transforms per batch (Algorithm 1's ``K_max``; not in Table 3).
        epsilon: estimated-gain threshold ε for accepting a transform (5%).
        H: FCT history kept, in epochs (60).
        E_max: exploratory rounds without a kept improvement before REACT sticks to the pattern;
            after E_max·B epochs without exploration it explores again (5).
        A_max: most trial patterns over the whole run (None: unbounded).
        tau_r: revert threshold τ_r (paper 5% with its one-batch mean; 1% here, judged by the test;
            2% until the eleventh session of RESULTS-react.md, which measures both):
            keep a new pattern only if the measured epoch time improves by (1 + τ_r).
        apply_delay: L, epochs between a decision and the epoch every rank switches (§6.3: 5).
        seed: seed of the random choices among equally ranked swaps.
        search: "local" (default): :func:`~reactccl.tuner.steepest.local_search` over ①②③ on the
            fitted :class:`~reactccl.tuner.estimate.LinkModel`, many moves per decision; or
            "greedy": the paper's Algorithm 1 (:func:`~reactccl.tuner.greedy.apply_transforms`).
        max_moves, max_evals: local search limits (moves per decision, candidates scored).
        estimator: how the local search estimates a candidate's epoch: "closed" (the model's
            closed-form FCTs on the critical path), "fluid" (max-min sharing on the learned
            links, :mod:`~reactccl.tuner.fluid`) or "auto" (default): fluid up to
            :data:`FLUID_MAX_RANKS` ranks, closed above (where a fluid estimate costs ~10 ms
            a candidate: a 256-rank decision took 4.5 s instead of 0.33 s).
        eval_work: small patterns may score more candidates: ``max(max_evals, eval_work // F)``
            for F flows (a candidate's cost grows with F).
        noise_mult: Eq. 2 needs the flow's spread above δ2 + noise_mult x the noise floor
            (:func:`~reactccl.tuner.detect.noise_floor`).
        verdict: "test" (default): keep or revert a trial on a Welch test of the epoch times
            (see :class:`~reactccl.tuner.controller.ReactController`); "mean": the paper's one
            batch mean against (1 + τ_r).
        z: the test's threshold (a one-sided z of 2: about 2.3% of noise-only trials misjudged).
        max_trial_batches: batches a trial may run while the test is undecided.
        ban_batches: batches a losing trial's moves stay banned at most (they lift earlier when the
            congestion the model sees changes).
    """

    B: int = 6
    delta1: float = 0.2
    delta2: float = 0.15
    K_t: int = 15
    K_growth: int = 1
    K_max: int = 4
    epsilon: float = 0.05
    H: int = 60
    E_max: int = 5
    A_max: int | None = None
    tau_r: float = 0.01
    apply_delay: int = 5
    seed: int = 0
    search: str = "local"
    max_moves: int = 8
    max_evals: int = 320
    eval_work: int = 100_000
    estimator: str = "auto"
    noise_mult: float = 2.0
    verdict: str = "test"
    z: float = 2.0
    max_trial_batches: int = 3
    ban_batches: int = 20

    def estimator_for(self, num_ranks: int) -> str:
        """The estimator the local search uses for a pattern of ``num_ranks`` ranks."""
        if self.estimator != "auto":
            return self.estimator
        return "fluid" if num_ranks <= FLUID_MAX_RANKS else "closed"

    def __post_init__(self) -> None:
        if self.search not in ("local", "greedy"):
            raise ValueError(f"ReactParams.search: expected 'local' or 'greedy', got {self.search!r}")
        if self.estimator not in ("auto", "closed", "fluid"):
            raise ValueError(f"ReactParams.estimator: expected 'auto', 'closed' or 'fluid', got {self.estimator!r}")
        if self.verdict not in ("test", "mean"):
            raise ValueError(f"ReactParams.verdict: expected 'test' or 'mean', got {self.verdict!r}")
        for name in ("B", "K_t", "K_max", "H", "E_max", "max_moves", "max_evals", "max_trial_batches",
                     "ban_batches", "eval_work"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"ReactParams.{name}: expected an integer >= 1, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, numbers.Integral) or self.seed < 0:
            raise ValueError(f"ReactParams.seed: expected an integer >= 0, got {self.seed!r}")
        for name in ("K_growth", "apply_delay"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"ReactParams.{name}: expected an integer >= 0, got {v!r}")
        for name in ("delta1", "delta2", "epsilon", "tau_r", "noise_mult", "z"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 <= v < 10):
                raise ValueError(f"ReactParams.{name}: expected a number in [0, 10), got {v!r}")
        if self.delta1 >= 1:
            raise ValueError(f"ReactParams.delta1: must be < 1, got {self.delta1}")
        if self.A_max is not None and (not isinstance(self.A_max, int) or self.A_max < 0):
            raise ValueError(f"ReactParams.A_max: expected None or an integer >= 0, got {self.A_max!r}")
        if self.H < self.B:
            raise ValueError(f"ReactParams.H ({self.H}) must be >= B ({self.B})")

    def to_dict(self) -> dict[str, Any]:
        """The parameters as a plain dict (JSON-ready)."""
        return asdict(self)

"""REACT's parameters (Table 3, A.4), all settable, with the paper's values as defaults."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ReactParams"]


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
        tau_r: revert threshold τ_r: keep a new pattern only if the measured epoch time improves by
            (1 + τ_r) (5%).
        apply_delay: L, epochs between a decision and the epoch every rank switches (§6.3: 5).
        seed: seed of the random choices among equally ranked swaps.
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
    tau_r: float = 0.05
    apply_delay: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("B", "K_t", "K_max", "H", "E_max"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"ReactParams.{name}: expected an integer >= 1, got {v!r}")
        for name in ("K_growth", "apply_delay"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"ReactParams.{name}: expected an integer >= 0, got {v!r}")
        for name in ("delta1", "delta2", "epsilon", "tau_r"):
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

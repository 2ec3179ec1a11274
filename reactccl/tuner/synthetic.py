"""A tiny executor for tests and benchmarks: traces from a NIC-sharing model, no network.

Flow ``f`` gets ``rate / share`` where ``share`` is the larger of its source's out-degree and its
destination's in-degree at its step (fair sharing of each NIC), slowed by a factor when it enters
(or leaves) a congested rank; FCT = ``alpha`` + bytes x 8 / rate, times optional log-normal noise;
flows start when their dependencies end. Congestion is injected exactly where a test wants it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..pattern import CollectivePattern
from ..trace import EpochTrace
from .paths import schedule

__all__ = ["SyntheticExecutor"]


class SyntheticExecutor:
    """``run_epoch(pattern) -> EpochTrace`` on the NIC-sharing model above.

    Args:
        message_bytes: S in bytes.
        rate: NIC rate in bit/s.
        alpha: per-flow latency in s.
        slow_into, slow_out: ``{rank: factor >= 1}``: flows into / out of the rank are that many
            times slower (steady congestion on its link).
        erratic: ``{rank: (probability, factor)}``: in each epoch, with that probability, flows into
            the rank are ``factor`` times slower (erratic congestion).
        noise: sigma of log-normal FCT noise (0: none).
        seed: seeds noise and erratic draws.
    """

    def __init__(self, message_bytes: float = 20e6, rate: float = 100e9, alpha: float = 1e-6,
                 slow_into: Mapping[int, float] | None = None, slow_out: Mapping[int, float] | None = None,
                 erratic: Mapping[int, tuple[float, float]] | None = None, noise: float = 0.0,
                 seed: int = 0) -> None:
        if message_bytes <= 0 or rate <= 0 or alpha < 0 or noise < 0:
            raise ValueError("SyntheticExecutor: message_bytes and rate must be > 0, alpha and noise >= 0")
        for name, m in (("slow_into", slow_into), ("slow_out", slow_out)):
            bad = [r for r, f in (m or {}).items() if f < 1]
            if bad:
                raise ValueError(f"SyntheticExecutor.{name}: factor for rank {bad[0]} must be >= 1")
        self.message_bytes, self.rate, self.alpha, self.noise = float(message_bytes), float(rate), alpha, noise
        self.slow_into, self.slow_out = dict(slow_into or {}), dict(slow_out or {})
        self.erratic = dict(erratic or {})
        self.rng = np.random.default_rng(seed)
        self.epoch = 0

    def fct(self, pattern: CollectivePattern) -> np.ndarray:
        """FCTs (s) of one epoch of ``pattern``, shape ``(F,)`` (draws noise/erratic events)."""
        p = pattern
        indeg, outdeg = p.degrees()
        share = np.maximum(outdeg[p.step, p.src], indeg[p.step, p.dst]).astype(np.float64)
        slow = np.ones(p.num_ranks)
        for r, f in self.slow_into.items():
            slow[r] *= f
        for r, (prob, f) in self.erratic.items():
            if self.rng.random() < prob:
                slow[r] *= f
        out = np.ones(p.num_ranks)
        for r, f in self.slow_out.items():
            out[r] *= f
        rate = self.rate / (share * slow[p.dst] * out[p.src])
        t = self.alpha + p.flow_bytes(self.message_bytes) * 8.0 / rate
        if self.noise:
            t = t * self.rng.lognormal(0.0, self.noise, size=t.shape)
        return t

    def run_epoch(self, pattern: CollectivePattern) -> EpochTrace:
        """One epoch of ``pattern``: per-flow start/end from the model, data-driven."""
        w = self.fct(pattern)
        finish, _ = schedule(pattern, w)
        tr = EpochTrace(self.epoch, pattern, self.message_bytes, finish - w, finish,
                        pattern.flow_bytes(self.message_bytes), float(finish.max()) if finish.size else 0.0)
        self.epoch += 1
        return tr

"""A job's epoch-invariant arrays for the compiled engine: start conditions and every ECMP port's path.

Per epoch a job only draws one port per flow (REACT §7.3); the pattern's join graph
(:mod:`.joins`), its bytes and the path of every (flow, port) are the same every epoch. A
:class:`JobData` computes them once, and :meth:`JobData.epoch_paths` assembles one epoch's
paths from the drawn ports with a few numpy gathers. The paths are exactly those of
``topology.ecmp_paths(src, dst, (job, flow, port))``.
"""

from __future__ import annotations

import numpy as np

from ..pattern import CollectivePattern
from ..topology import Topology
from .joins import join_graph

__all__ = ["JobData"]


class JobData:
    """Epoch-invariant arrays of one job (pattern on host ``placement``, job index ``job_id``).

    Attributes:
        pattern: the pattern (kept so that an identity-keyed cache stays valid).
        graph: its :class:`~reactccl.netsim.joins.JoinGraph` for ``order``.
        nbytes: payload bytes per flow, shape ``(F,)``.
    """

    def __init__(self, topology: Topology, pattern: CollectivePattern, placement: np.ndarray, job_id: int,
                 message_bytes: float, ports: int, order: str) -> None:
        self.pattern = pattern
        self.graph = join_graph(pattern, order)
        self.nbytes = pattern.flow_bytes(message_bytes)
        F = pattern.num_flows
        src, dst = placement[pattern.src], placement[pattern.dst]
        K = 1 if topology.router is not None else ports        # fixed routes: one whatever the port
        keys = np.column_stack([np.full(K * F, job_id), np.tile(np.arange(F), K), np.repeat(np.arange(K), F)])
        ptr, lk = topology.ecmp_paths(np.tile(src, K), np.tile(dst, K), keys)   # every port in one call
        self._len = np.diff(ptr).reshape(K, F)                               # (ports, F)
        self._start = ptr[:-1].reshape(K, F)                                  # (ports, F)
        self._links = lk
        self._lat = (np.add.reduceat(topology.latency[lk], ptr[:-1]) if F else np.zeros(0)).reshape(K, F)
        self._flows = np.arange(F)

    def table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every port's paths: length and offset into ``links`` shape ``(K, F)``, ``links``, and
        latency (s) shape ``(K, F)``; K = 1 on a topology with fixed routes."""
        return self._len, self._start, self._links, self._lat

    def epoch_paths(self, ports: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ptr (F+1,), links, latency (F,))`` of the paths for the drawn ``ports`` (shape ``(F,)``)."""
        row = np.minimum(ports, self._len.shape[0] - 1)
        n = self._len[row, self._flows]
        ptr = np.zeros(len(n) + 1, dtype=np.int64)
        np.cumsum(n, out=ptr[1:])
        idx = np.repeat(self._start[row, self._flows] - ptr[:-1], n) + np.arange(ptr[-1])
        return ptr, self._links[idx], self._lat[row, self._flows]

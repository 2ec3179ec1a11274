"""Bandwidth deficiencies Ψ, Θ, Ω and the round-synchronous α-β time of a schedule.

A schedule is a :class:`~reactccl.pattern.CollectivePattern`; its step ``s`` is round
``s+1``. Flows are logical (node to node); a fabric (see :mod:`reactccl.topology.torus`)
routes each flow, and the flow's bytes load every link on its route. Transmissions on one
directed link in one round are packed into one message: per round and link the bytes of
all flows add up, and the round costs one α (SP-allreduce §3.1, §7.1 "Chunks").

With N the message (bytes), p ranks, |E| directed links and ``l_s(e)`` the load of link
``e`` in round ``s`` (SP-allreduce §2.2)::

    Vol_abs = sum of flow bytes           Vol_phys = sum of flow bytes x route length
    Psi   = Vol_abs / V_min               (V_min = 2N(p-1) for AllReduce)
    Theta = Vol_phys / Vol_abs
    Omega = sum_s max_e l_s(e) / sum_s mean_e l_s(e)
    Q     = sum_s max_e l_s(e)            T_model = alpha * S + beta * Q

so ``T_model = alpha*S + beta * V_min/|E| * Psi*Theta*Omega`` (β = seconds per byte).
Source: SP-allreduce (arXiv 2610.16387) §2.2, eq. (6).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..pattern import Collective, CollectivePattern

__all__ = ["Deficiency", "deficiency", "from_round_loads", "link_loads", "round_times", "min_volume"]


def min_volume(collective: Collective | str, num_ranks: int) -> float:
    """Minimum total volume, in units of the message N, that any schedule must send:
    AllReduce ``2(p-1)`` (SP-allreduce Prop. 2.1); AllGather and ReduceScatter ``p-1``
    (each of the p ranks receives or sends ``p-1`` blocks of ``N/p``); Broadcast and Reduce ``p-1`` (every non-root receives or sends N once); AllToAll ``p-1`` in units of one rank's buffer (nccl-tests'
    size: each rank sends ``p-1`` of its ``p`` blocks).

    Raises:
        ValueError: unknown collective.
    """
    c, p = Collective(collective), int(num_ranks)
    if c is Collective.ALLREDUCE:
        return 2.0 * (p - 1)
    return float(p - 1)


@dataclass(frozen=True)
class Deficiency:
    """Round and volume figures of one schedule on one fabric (message normalised to 1
    unless ``message_bytes`` was given; then volumes are bytes).

    Attributes:
        rounds: S, the number of steps that carry flows.
        vol_abs, vol_phys: Vol_abs and Vol_phys.
        psi, theta, omega: the deficiencies (each >= 1 for a correct AllReduce).
        q: Σ_s max_e l_s(e), the bandwidth term's volume.
        max_load: per-round max link load, shape ``(S,)`` (kept as a tuple).
        max_hops: per-round longest route (hops), shape ``(S,)``.
        num_links: |E|.
    """

    rounds: int
    vol_abs: float
    vol_phys: float
    psi: float
    theta: float
    omega: float
    q: float
    max_load: tuple
    max_hops: tuple
    num_links: int

    def time(self, alpha: float, beta: float) -> float:
        """α-β time ``alpha*S + beta*Q`` (α s per round, β s per unit of volume)."""
        return alpha * self.rounds + beta * self.q

    def as_dict(self) -> dict:
        """Plain dict (for JSON)."""
        d = asdict(self)
        d["max_load"], d["max_hops"] = list(self.max_load), list(self.max_hops)
        return d


def link_loads(pattern: CollectivePattern, fabric, message_bytes: float = 1.0):
    """Per-round link loads of a schedule.

    Args:
        pattern: the schedule.
        fabric: a geometry with ``num_links`` and ``route_pairs(src, dst)``.
        message_bytes: N (default 1: loads are fractions of the message).

    Returns:
        ``(rounds, loads, hops, flow_len)``: the step of each round, shape ``(S,)``;
        loads, shape ``(S, |E|)``; longest route per round, shape ``(S,)``; route length
        of every flow, shape ``(F,)``.

    Raises:
        ValueError: the fabric has fewer nodes than the pattern has ranks, or a flow
            joins a node to itself on the fabric.
    """
    if fabric.num_nodes < pattern.num_ranks:
        raise ValueError(f"fabric {getattr(fabric, 'name', fabric)!r} has {fabric.num_nodes} nodes, "
                         f"pattern has {pattern.num_ranks} ranks")
    fbytes = pattern.flow_bytes(message_bytes)
    # route each distinct (src, dst) pair once
    key = pattern.src * fabric.num_nodes + pattern.dst
    ukey, inv = np.unique(key, return_inverse=True)
    pidx, links = fabric.route_pairs(ukey // fabric.num_nodes, ukey % fabric.num_nodes)
    plen = np.bincount(pidx, minlength=len(ukey))
    flow_len = plen[inv]
    if (flow_len == 0).any():
        raise ValueError("link_loads: a flow has an empty route")
    rounds, sidx = np.unique(pattern.step, return_inverse=True)
    S, L = len(rounds), fabric.num_links
    # load of (round, pair) first, then spread over each pair's links
    rp = np.bincount(sidx * len(ukey) + inv, weights=fbytes, minlength=S * len(ukey)).reshape(S, len(ukey))
    loads = np.zeros((S, L))
    for s in range(S):
        loads[s] = np.bincount(links, weights=rp[s, pidx], minlength=L)
    hops = np.zeros(S, dtype=np.int64)
    np.maximum.at(hops, sidx, flow_len)
    return rounds, loads, hops, flow_len


def deficiency(pattern: CollectivePattern, fabric, message_bytes: float = 1.0) -> Deficiency:
    """Ψ, Θ, Ω, S, Vol_abs, Vol_phys and Q of ``pattern`` routed on ``fabric``.

    See the module docstring for the definitions; :func:`link_loads` for the arguments.
    """
    rounds, loads, hops, flow_len = link_loads(pattern, fabric, message_bytes)
    fbytes = pattern.flow_bytes(message_bytes)
    vmin = min_volume(pattern.collective, pattern.num_ranks) * message_bytes
    return from_round_loads(loads.max(axis=1), hops, float(fbytes.sum()), float((fbytes * flow_len).sum()),
                            vmin, fabric.num_links)


def from_round_loads(max_load: np.ndarray, max_hops: np.ndarray, vol_abs: float, vol_phys: float,
                     vmin: float, num_links: int) -> Deficiency:
    """A :class:`Deficiency` from per-round maxima and the volumes (see the module docstring).

    Args:
        max_load: the most loaded link's load in each round, shape ``(S,)``.
        max_hops: the longest route in each round, shape ``(S,)``.
        vol_abs, vol_phys: Vol_abs and Vol_phys; vmin: V_min; num_links: |E|.
    """
    mx = np.asarray(max_load, dtype=np.float64)
    mean_sum = vol_phys / num_links
    return Deficiency(
        rounds=len(mx), vol_abs=vol_abs, vol_phys=vol_phys,
        psi=vol_abs / vmin if vmin else float("nan"),
        theta=vol_phys / vol_abs if vol_abs else float("nan"),
        omega=float(mx.sum()) / mean_sum if mean_sum else float("nan"),
        q=float(mx.sum()), max_load=tuple(mx.tolist()), max_hops=tuple(np.asarray(max_hops).tolist()),
        num_links=int(num_links))


def round_times(d: Deficiency, message_bytes: float, link_rate: float, hop_latency: float,
                alpha: float = 0.0) -> np.ndarray:
    """Time of each round (s) in a synchronous store-and-forward model: ``alpha`` + the
    longest route x ``hop_latency`` + the most loaded link's bytes x 8 / ``link_rate``.
    ``d`` must have been computed for a message of 1 (loads are fractions).

    Raises:
        ValueError: a non-positive link rate.
    """
    if link_rate <= 0:
        raise ValueError(f"link_rate must be > 0 bit/s, got {link_rate}")
    mx, hp = np.asarray(d.max_load), np.asarray(d.max_hops)
    return alpha + hp * hop_latency + mx * message_bytes * 8.0 / link_rate

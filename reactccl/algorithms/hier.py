"""Servers as NCCL sees them: S servers of G GPUs and K NICs, and each channel's intra-server order.

Rank r is GPU ``r % G`` ("local rank") of server ``r // G``. Local GPU l is attached to NIC
``l * K // G`` (K = G: one NIC per GPU; K = 1: one NIC shared by all GPUs); the GPU "next to"
NIC k, NCCL's ``net->localGpu``, is the first local GPU on it, ``ceil(k * G / K)``.

NCCL's topology search (``src/graph/search.cc``) gives channel c a path that enters the server on
NIC ``c mod K`` (``ncclTopoSearchRecNet`` tries ``nets[(nChannels + i) % netCount]`` first), starts
at the GPU next to that NIC (``net->net.localGpu``) and, on an NVSwitch server where every GPU pair
is equally close, continues with the next GPU index first (``ncclTopoSearchNextGpuSort``: ring and
plain tree patterns try ``(g + 1) mod G`` first). So channel c's intra order is the rotation::

    l0 = ceil((c mod K) * G / K);   order_c = l0, l0+1, ..., l0+G-1  (mod G)

G = 8, K = 8: channel 0 is 0 1 2 3 4 5 6 7, channel 3 is 3 4 5 6 7 0 1 2. G = 8, K = 2: channels
alternate between 0 1 .. 7 and 4 5 6 7 0 1 2 3. K = 1: every channel is 0 1 .. 7.

Channel counts. NCCL's search finds about one channel per NIC (each at one NIC's bandwidth) and
``ncclTopoPostset`` (``src/graph/connect.cc``) duplicates every channel: ring channel c + n is the
same ring as channel c, tree channel c uses tree 0 and channel c + n the mirrored tree 1. A
duplicate ring loads the same links in the same order, so the ring default here keeps one
channel per NIC (``channels = K``) and the tree default keeps both trees per NIC
(``channels = 2 K``). With a channel count C given, tree channel c < ceil(C/2) is tree 0 on
channel c's intra order and channel c >= ceil(C/2) is tree 1 on channel ``c - ceil(C/2)``'s, which
is what NCCL's duplication followed by ``NCCL_MAX_NCHANNELS = C`` leaves (odd C: one more tree-0
channel than tree-1 channels; C = 1: tree 0 only).

Source: NCCL ``src/graph/search.cc`` (``ncclTopoSearchRecNet``, ``ncclTopoSearchNextGpuSort``),
``src/graph/connect.cc`` (``ncclTopoPreset``, ``connectRings``, ``connectTrees``,
``ncclTopoPostset``), BASELINES.md "Servers".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..pattern import PatternError
from ._build import check_int_option

__all__ = ["ServerShape", "server_shape", "resolve_channels", "tree_channel_plan"]


@dataclass(frozen=True)
class ServerShape:
    """S servers of G GPUs with K NICs each (module docstring): rank r = server r // G, local r % G.

    Attributes:
        servers: S >= 1.
        gpus: G >= 1, GPUs (ranks) per server.
        nics: K, 1 <= K <= G, NICs per server.
    """

    servers: int
    gpus: int
    nics: int

    @property
    def num_ranks(self) -> int:
        """N = S * G."""
        return self.servers * self.gpus

    def nic_of_local(self) -> np.ndarray:
        """NIC index of every local GPU, ``l * K // G``, shape ``(G,)`` int64."""
        return np.arange(self.gpus, dtype=np.int64) * self.nics // self.gpus

    def nic_gpu(self, nic: int) -> int:
        """The local GPU next to NIC ``nic`` (the first on it): ``ceil(nic * G / K)``."""
        return -(-int(nic) * self.gpus // self.nics)

    def intra_order(self, nic: int) -> np.ndarray:
        """The intra-server order of a channel on NIC ``nic``: local GPUs from ``nic_gpu(nic)``
        upwards, wrapping; shape ``(G,)`` int64."""
        return (self.nic_gpu(nic) + np.arange(self.gpus, dtype=np.int64)) % self.gpus

    def channel_orders(self, channels: int) -> np.ndarray:
        """Intra order of channels ``0..channels-1`` (channel c on NIC ``c mod K``), shape ``(C, G)``."""
        return np.stack([self.intra_order(c % self.nics) for c in range(channels)])


def server_shape(n: int, servers: int | None = None, gpus: int | None = None,
                 nics: int | None = None) -> ServerShape:
    """The server shape of ``n`` ranks from the options a generator got.

    Neither ``servers`` nor ``gpus``: n servers of 1 GPU. One of them: the other is ``n`` divided
    by it. Both: their product must be ``n``. ``nics`` defaults to G (one NIC per GPU).

    Raises:
        PatternError: naming the option: not an integer >= 1, not dividing ``n``, a product
            other than ``n``, or ``nics`` above ``gpus``.
    """
    n = check_int_option("n", n)
    S = None if servers is None else check_int_option("servers", servers)
    G = None if gpus is None else check_int_option("gpus", gpus)
    if S is not None and G is not None:
        if n != S * G:
            raise PatternError(f"servers x gpus: {S} x {G} = {S * G}, not the {n} ranks")
    elif S is not None:
        if n % S:
            raise PatternError(f"servers: {S} servers do not divide {n} ranks")
        G = n // S
    elif G is not None:
        if n % G:
            raise PatternError(f"gpus: {G} GPUs per server do not divide {n} ranks")
        S = n // G
    else:
        S, G = n, 1
    K = G if nics is None else check_int_option("nics", nics)
    if K > G:
        raise PatternError(f"nics: {K} NICs per server exceed its {G} GPUs (a NIC needs a GPU next to it)")
    return ServerShape(S, G, K)


def resolve_channels(shape: ServerShape, channels: int | None, tree: bool) -> int:
    """The channel count: ``channels`` if given, else K for the ring and 2K for the tree
    (module docstring).

    Raises:
        PatternError: ``channels`` not an integer >= 1.
    """
    if channels is None:
        return 2 * shape.nics if tree else shape.nics
    return check_int_option("channels", channels)


def tree_channel_plan(shape: ServerShape, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Which tree and which NIC every tree channel uses (module docstring).

    Returns:
        ``(tree, nic)``, shape ``(C,)`` each: tree 0 for ``c < ceil(C/2)``, else tree 1; the NIC of
        channel ``c`` (tree 0) or ``c - ceil(C/2)`` (tree 1), mod K.
    """
    c = np.arange(channels, dtype=np.int64)
    half = math.ceil(channels / 2)
    tree = (c >= half).astype(np.int64)
    return tree, np.where(tree == 0, c, c - half) % shape.nics

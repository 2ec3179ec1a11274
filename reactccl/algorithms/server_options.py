"""Generator options from a topology of multi-GPU servers: NCCL's hierarchy wherever a job runs on servers.

On a topology with servers (``topology.servers``, :mod:`reactccl.topology.servers`) the generators
of NCCL's hierarchical patterns (:data:`HIERARCHICAL`: ``ring``, ``nccl-tree``) get their server
options from the topology, so ``simulate``, ``perf``, ``demo``, :func:`reactccl.netsim.run_simulation`
and the experiments run NCCL's ring and tree as NCCL builds them on those servers. The rules of
:func:`server_options`:

* nothing is filled on a flat topology, for another generator, or with ``hierarchy=flat`` (the
  flat pattern on the same GPUs, for comparison);
* neither ``servers`` nor ``gpus`` given: ``gpus = G`` of the topology and ``servers = N / G``;
  ``nics`` not given: ``nics = K`` of the topology whenever the pattern's servers have the
  topology's G GPUs (with a ``gpus`` of another size the generator's default stays: a NIC per GPU);
  ``channels`` is always the caller's (default K for the ring, 2K for the tree, :mod:`.hier`);
* the ranks must fill whole servers (N a multiple of G): a partial server is refused, with a
  hint (a multiple of G, or ``hierarchy=flat``), not built: NCCL gives every node the same
  intra-server graph, and :class:`~.hier.ServerShape` is uniform;
* the placement must put rank r on GPU ``r mod G`` of the server that holds rank ``r - r mod G``
  (where the pattern's positions assume it, :mod:`.hier`). Placements ``first`` and ``random`` on
  servers do (:func:`reactccl.topology.placement`); an explicit host list that does not is
  refused, naming the first rank out of place.

Example: ``ring`` on 32 ranks of ``rail:servers=4,gpus=8`` (K = 8) gets ``servers=4, gpus=8,
nics=8`` and builds ``ring(servers=4,gpus=8,nics=8,channels=8)``; on ``fat-tree:k=8,gpus=8`` (one
shared NIC per server) ``ring(servers=4,gpus=8,nics=1,channels=1)``.

Source: NCCL ``src/graph/search.cc``, ``src/graph/connect.cc`` (every node searched with the same
graph); BASELINES.md "Servers".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..pattern import PatternError
from ..topology import ServerLayout, Topology
from ..topology import placement as place_ranks
from .hier import resolve_channels, server_shape
from .registry import checked_options

__all__ = ["HIERARCHICAL", "SERVER_KEYS", "server_options", "hierarchy_note"]

#: Generators built on NCCL's hierarchy when the ranks sit on servers: name -> whether its default
#: channel count is the tree's (2K, both trees on every NIC) rather than the ring's (K).
HIERARCHICAL: dict[str, bool] = {"ring": False, "nccl-tree": True}

#: The options :func:`server_options` fills.
SERVER_KEYS = ("servers", "gpus", "nics")


def server_options(name: str, num_ranks: int, topology: Topology, options: Mapping[str, Any] | None = None,
                   placement: str | Sequence[int] | np.ndarray = "first", seed: int = 0) -> dict:
    """``options`` for generator ``name`` on ``num_ranks`` ranks of ``topology``, with the server
    options filled from ``topology.servers`` (the rules of the module docstring).

    Args:
        name: a registered generator.
        num_ranks: N.
        topology: the topology (a flat one, or another generator: ``options`` come back as given).
        options: the caller's options (text values as from a command line, or typed).
        placement, seed: where the ranks run, as :func:`reactccl.topology.placement` takes them
            (``"first"``, ``"random"`` drawn with ``seed``, or host ids/names), checked against the
            pattern's positions.

    Returns:
        A new dict: ``options`` plus the filled keys of :data:`SERVER_KEYS`.

    Raises:
        PatternError: an unknown option or a bad value (from the registry); ranks that do not
            fill whole servers; a rank placed off its server or local GPU (named).
        TopologyError: a placement :func:`reactccl.topology.placement` refuses.
    """
    opts = dict(options or {})
    layout = getattr(topology, "servers", None)
    if layout is None or name not in HIERARCHICAL:
        return opts
    given = checked_options(name, opts)
    if given.get("hierarchy") == "flat":
        return opts
    n, G = int(num_ranks), layout.G
    if given.get("servers") is None and given.get("gpus") is None:
        if n % G:
            lo, hi = n // G * G, -(-n // G) * G
            multiples = f"{hi}" if lo == 0 else f"{lo} or {hi}"
            raise PatternError(
                f"{name} on {topology.name}: {n} ranks do not fill whole servers of {G} GPUs, which NCCL's "
                f"hierarchical {name} needs; use a multiple of {G} ranks ({multiples}), or the option "
                f"hierarchy=flat (-O hierarchy=flat) for the flat {name} on these GPUs")
        opts["servers"], opts["gpus"] = n // G, G
        gpus = G
    else:
        gpus = given.get("gpus")
        if gpus is None:
            gpus = n // given["servers"] if n % given["servers"] == 0 else None
    if gpus != G:
        return opts
    _check_placement(name, topology, layout, place_ranks(topology, n, placement, seed=seed), n)
    if given.get("nics") is None:
        opts["nics"] = layout.K
    return opts


def _check_placement(name: str, topology: Topology, layout: ServerLayout, hosts: np.ndarray, n: int) -> None:
    """PatternError naming the first rank not on GPU ``r mod G`` of the server of rank ``r - r mod G``."""
    G = layout.G
    r = np.arange(n)
    server, local = layout.server_of_host[hosts], layout.local_of_host[hosts]
    head = r - r % G
    bad = np.flatnonzero((server < 0) | (local != r % G) | (server != server[head]))
    if not len(bad):
        return
    b = int(bad[0])
    where = topology.hosts[int(hosts[b])]
    if server[b] < 0:
        why = f"host {where}, not a GPU"
    else:
        h = int(head[b])
        home = "a server" if h == b else f"server {int(server[h])}, with rank {h}"
        why = (f"{where} (GPU {int(local[b])} of server {int(server[b])}), but NCCL's hierarchical {name} puts rank r "
               f"on GPU r mod {G} of the server of rank r - r mod {G}: rank {b} on GPU {b % G} of {home}")
    raise PatternError(f"{name} on {topology.name}: rank {b} is on {why}; place ranks by whole servers in local "
                       f"order (placement first or random), or set hierarchy=flat, or give servers/gpus yourself")


def hierarchy_note(name: str, num_ranks: int, options: Mapping[str, Any] | None = None) -> str | None:
    """One line on the hierarchy generator ``name`` builds with ``options`` on ``num_ranks`` ranks
    (as :func:`server_options` filled them), e.g. ``"ring: NCCL's hierarchical ring over 4 servers
    x 8 GPUs, 8 NICs each, 8 channels"`` or ``"ring: flat (hierarchy=flat)"``; None for a
    generator not in :data:`HIERARCHICAL`.

    Raises:
        PatternError: options the generator refuses (named).
    """
    if name not in HIERARCHICAL:
        return None
    given = checked_options(name, dict(options or {}))
    if given.get("hierarchy") == "flat":
        return f"{name}: flat (hierarchy=flat)"
    shape = server_shape(int(num_ranks), given.get("servers"), given.get("gpus"), given.get("nics"))
    channels = resolve_channels(shape, given.get("channels"), tree=HIERARCHICAL[name])
    if shape.gpus == 1 and channels == (2 if HIERARCHICAL[name] else 1):   # the generators' flat case
        return f"{name}: flat (one GPU per server)"
    nics = f"{shape.nics} NIC{'s' * (shape.nics > 1)} each"
    return (f"{name}: NCCL's hierarchical {'tree' if HIERARCHICAL[name] else 'ring'} over {shape.servers} "
            f"server{'s' * (shape.servers > 1)} x {shape.gpus} GPUs, {nics}, {channels} channel{'s' * (channels > 1)}")

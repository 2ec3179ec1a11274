"""A servers topology built by hand for the physics tests of the hierarchical patterns: S servers
of G GPUs (hosts, host id = server * G + local) on one NVSwitch each, K NICs per server, NIC k of
every server on rail k's leaf switch (no spine: the routes below never change rails), routed as
NCCL routes with PXN (BASELINES.md "Servers"): same server GPU -> NVSwitch -> GPU; otherwise out
by the NIC on the destination GPU's rail, reached over NVLink through the GPU with the
destination's local index when the sender is not on that NIC, and in by the destination's own NIC.
"""

import networkx as nx
import numpy as np

from reactccl.topology import Topology
from reactccl.topology.graph import add_cable

H100 = {"nvlink": 3.6e12, "pcie": 512e9, "nic_rate": 400e9}     # bit/s per direction


def rail_servers(S: int, G: int, K: int, nvlink: float, pcie: float, nic_rate: float,
                 latency: float = 1e-7) -> Topology:
    """The topology of the module docstring with a fixed router; every link has ``latency`` s."""
    g = nx.DiGraph()
    gpu = [f"s{s}g{j}" for s in range(S) for j in range(G)]
    for name in gpu:
        g.add_node(name, kind="host")
    nic_of = np.arange(G) * K // G
    for s in range(S):
        g.add_node(f"s{s}nvs", kind="switch")
        for k in range(K):
            g.add_node(f"s{s}nic{k}", kind="switch")
    for k in range(K):
        g.add_node(f"rail{k}", kind="switch")
    for s in range(S):
        for j in range(G):
            add_cable(g, f"s{s}g{j}", f"s{s}nvs", nvlink, latency)
            add_cable(g, f"s{s}g{j}", f"s{s}nic{nic_of[j]}", pcie, latency)
        for k in range(K):
            add_cable(g, f"s{s}nic{k}", f"rail{k}", nic_rate, latency)
    topo_box = {}

    def L(u, v):
        return topo_box["t"].link_id(u, v)

    def route(a: int, b: int) -> list[int]:
        sa, la, sb, lb = a // G, a % G, b // G, b % G
        if sa == sb:
            return [L(gpu[a], f"s{sa}nvs"), L(f"s{sa}nvs", gpu[b])]
        r = nic_of[lb]
        out = []
        if nic_of[la] != r:                           # PXN: over NVLink to the GPU on the receiver's rail
            proxy = gpu[sa * G + lb]
            out += [L(gpu[a], f"s{sa}nvs"), L(f"s{sa}nvs", proxy)]
            a = sa * G + lb
        return out + [L(gpu[a], f"s{sa}nic{r}"), L(f"s{sa}nic{r}", f"rail{r}"), L(f"rail{r}", f"s{sb}nic{r}"),
                      L(f"s{sb}nic{r}", gpu[b])]

    N = S * G
    table = np.full((N, N, 6), -1, dtype=np.int64)

    def router(src, dst):
        if (table[0, 1 % N] < 0).all() and N > 1:     # fill the route table once, on first use
            for a in range(N):
                for b in range(N):
                    if a != b:
                        r = route(a, b)
                        table[a, b, :len(r)] = r
        rows = table[src, dst]
        pair, hop = np.nonzero(rows >= 0)
        return pair, rows[pair, hop]

    topo = Topology(g, f"hand-rail:servers={S},gpus={G},nics={K}", router=router)
    topo_box["t"] = topo
    return topo

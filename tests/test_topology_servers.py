"""Multi-GPU servers in the topology: layout, names and rates, specs, routes (NVLink, NICs, PXN), placement."""

import numpy as np
import pytest

from reactccl.topology import TopologyError, fat_tree, parse_topology, placement, rail, with_servers
from reactccl.topology.server_fabrics import parse_server_rate


def route(t, s, d):
    """Every path of host s -> host d as lists of 'u->v'."""
    return [[t.describe_link(int(lk)) for lk in p] for p in t.shortest_paths(s, d)]


# ------------------------------------------------------------------ layout and specs
def test_rail_2x2_layout_names_and_rates():
    t = parse_topology("rail:servers=2,gpus=2")
    assert t.hosts == ["s0g0", "s0g1", "s1g0", "s1g1", "st0", "st1"]
    lay = t.servers
    assert (lay.S, lay.G, lay.K, lay.pxn) == (2, 2, 2, True)
    assert lay.server_of_host.tolist() == [0, 0, 1, 1, -1, -1]
    assert lay.local_of_host.tolist() == [0, 1, 0, 1, -1, -1]
    assert lay.gpu_host.tolist() == [[0, 1], [2, 3]]
    assert [t.nodes[n] for n in lay.nic_node.ravel()] == ["s0nic0", "s0nic1", "s1nic0", "s1nic1"]
    assert [t.describe_link(int(lk)) for lk in lay.nic_down[1]] == ["r0l0->s1nic0", "r1l0->s1nic1"]
    assert [t.describe_link(int(lk)) for lk in lay.pcie_up[0]] == ["s0g0->s0nic0", "s0g1->s0nic1"]
    kinds = t.link_kinds()
    # 4 GPUs x 2 directions each of NVLink and PCIe; 4 NIC cables; 2 leaves x 2 spines + 2 storage cables
    assert {k: int((kinds == k).sum()) for k in ("nvlink", "pcie", "nic", "fabric")} == {
        "nvlink": 8, "pcie": 8, "nic": 8, "fabric": 12}
    cap = {k: set(t.capacity[kinds == k].tolist()) for k in ("nvlink", "pcie", "nic", "fabric")}
    assert cap == {"nvlink": {3.6e12}, "pcie": {512e9}, "nic": {400e9}, "fabric": {400e9}}
    assert set(t.latency.tolist()) == {1e-6}


def test_rail_defaults_at_size():
    t = parse_topology("rail:servers=4,gpus=8")
    # 32 GPUs + 8 storage hosts (one per rail leaf); 4 NVSwitches, 32 NICs, 8 leaves, 4 spines
    assert (t.num_hosts, len(t.switches)) == (40, 48)
    assert t.num_links == 4 * (4 * 8 + 2 * 8) + 2 * 8 * 4 + 2 * 8
    t = rail(64, 8)   # two leaves per rail (32 servers each), 32 spines
    assert t.servers.nic_node.shape == (64, 8)
    assert {t.nodes[t.link_dst[lk]] for lk in t.servers.nic_up[:, 3].tolist()} == {"r3l0", "r3l1"}
    assert sum(1 for n in t.switches if n.startswith("sp")) == 32


def test_server_specs_names_and_options():
    t = parse_topology("rail:servers=2,gpus=4,nics=2,nvlink=900GB/s,pcie=256G,rate=200G,latency=2us,"
                       "spines=3,storage=1,pxn=0")
    assert t.name == ("rail:servers=2,gpus=4,nics=2,nvlink=7200G,pcie=256G,rate=200G,latency=2us,spines=3,"
                      "storage=1,pxn=0")
    lay = t.servers
    assert (lay.K, lay.nvlink, lay.pcie, lay.nic_rate, lay.pxn) == (2, 7.2e12, 256e9, 200e9, False)
    assert lay.nic_of_local.tolist() == [0, 0, 1, 1]
    assert t.hosts[-1] == "st0" and t.num_hosts == 9
    assert parse_topology("rail:servers=2,gpus=2,nvlink=450GB/s").name == "rail:servers=2,gpus=2"
    assert parse_topology(t.name).name == t.name       # a name is a spec of the same topology
    f = parse_topology("fat-tree:k=4,gpus=2")
    assert f.name == "fat-tree:k=4,gpus=2" and (f.servers.S, f.servers.G, f.servers.K) == (16, 2, 1)
    assert f.num_hosts == 32 and f.num_links == 96 - 32 + 16 * (4 * 2 + 2 * 1)
    assert f.servers.nic_rate == 100e9 and not f.servers.pxn
    g = parse_topology("leaf-spine:leaves=2,spines=2,hosts=2,rate=50G,gpus=4,nics=2,pxn=1")
    assert g.name == "leaf-spine:leaves=2,spines=2,hosts=2,rate=50G,gpus=4,nics=2,pxn=1"
    assert parse_topology(g.name).num_links == g.num_links and parse_topology(g.name).servers.pxn
    assert set(g.capacity[g.servers.nic_up.ravel()].tolist()) == {50e9}
    # both NICs of a slot on the slot's switch, each with its own cable
    assert [g.describe_link(int(lk)) for lk in g.servers.nic_up[1]] == ["s1nic0->leaf0", "s1nic1->leaf0"]


@pytest.mark.parametrize("spec, msg", [
    ("rail:servers=2", "missing key 'gpus'"),
    ("rail:gpus=2", "missing key 'servers'"),
    ("fat-tree:k=4,nics=2", "need gpus=G"),
    ("rail:servers=2,gpus=2,nics=3", "at most 2 NICs"),
    ("rail:servers=2,gpus=0", "gpus: expected an integer >= 1"),
    ("rail:servers=2,gpus=2,leaves_per_rail=3", "leave a leaf empty"),
    ("rail:servers=2,gpus=2,storage=-1", "storage: expected an integer >= 0"),
    ("rail:servers=2,gpus=2,pxn=2", "pxn must be 0 or 1"),
    ("rail:servers=2,gpus=2,nvlink=450GB", "reads as bytes per second"),
    ("rail:servers=2,gpus=2,nvlink=450", "has no unit"),
    ("rail:servers=2,gpus=2,gpus=4", "given twice"),
    ("dragonfly:a=2,p=1,h=1,gpus=2", "not on dragonfly"),
    ("torus:4x4,gpus=2", "not on torus"),
    ("rail:servers=2,gpus=2,foo=1", "unknown key 'foo'"),
])
def test_server_spec_errors(spec, msg):
    with pytest.raises(TopologyError, match=msg):
        parse_topology(spec)


def test_with_servers_refuses_twice_and_rates():
    t = with_servers(fat_tree(2), 2)
    with pytest.raises(TopologyError, match="already a topology of servers"):
        with_servers(t, 2)
    assert parse_server_rate("450GB/s", "nvlink") == 3.6e12
    assert parse_server_rate("3.6T", "nvlink") == 3.6e12
    assert parse_server_rate("64GB/s", "pcie") == 512e9


# ------------------------------------------------------------------ routes
def test_rail_routes_by_hand():
    t = parse_topology("rail:servers=2,gpus=2")
    assert route(t, 0, 1) == [["s0g0->s0nvs", "s0nvs->s0g1"]]                       # same server: NVLink
    assert route(t, 0, 2) == [["s0g0->s0nic0", "s0nic0->r0l0", "r0l0->s1nic0", "s1nic0->s1g0"]]  # rail 0
    # PXN: s1g1 is on rail 1; s0g0 moves the data over NVLink to s0g1, whose NIC sends it on rail 1
    assert route(t, 0, 3) == [["s0g0->s0nvs", "s0nvs->s0g1", "s0g1->s0nic1", "s0nic1->r1l0", "r1l0->s1nic1",
                               "s1nic1->s1g1"]]
    # storage into a GPU: by the GPU's own NIC, across a spine (ECMP over both); GPU to storage: own NIC
    assert route(t, 4, 3) == [["st0->r0l0", "r0l0->sp0", "sp0->r1l0", "r1l0->s1nic1", "s1nic1->s1g1"],
                              ["st0->r0l0", "r0l0->sp1", "sp1->r1l0", "r1l0->s1nic1", "s1nic1->s1g1"]]
    assert route(t, 3, 5) == [["s1g1->s1nic1", "s1nic1->r1l0", "r1l0->st1"]]
    t0 = parse_topology("rail:servers=2,gpus=2,pxn=0")   # without PXN: own NIC, then across a spine
    assert route(t0, 0, 3) == [["s0g0->s0nic0", "s0nic0->r0l0", "r0l0->sp0", "sp0->r1l0", "r1l0->s1nic1",
                                "s1nic1->s1g1"],
                               ["s0g0->s0nic0", "s0nic0->r0l0", "r0l0->sp1", "sp1->r1l0", "r1l0->s1nic1",
                                "s1nic1->s1g1"]]


def test_pxn_with_two_gpus_per_nic():
    t = parse_topology("rail:servers=2,gpus=4,nics=2")    # g0, g1 on nic0; g2, g3 on nic1
    # s0g1 -> s1g2: rail 1; s0g1 is not on nic1, so the proxy is s0g2 (the destination's local index)
    assert route(t, 1, 6) == [["s0g1->s0nvs", "s0nvs->s0g2", "s0g2->s0nic1", "s0nic1->r1l0", "r1l0->s1nic1",
                               "s1nic1->s1g2"]]
    # s0g3 -> s1g2: s0g3 already sits on nic1 (rail 1): straight out
    assert route(t, 3, 6) == [["s0g3->s0nic1", "s0nic1->r1l0", "r1l0->s1nic1", "s1nic1->s1g2"]]


def test_shared_nic_fat_tree_routes_by_hand():
    t = parse_topology("fat-tree:k=4,gpus=2")   # 16 servers of 2 GPUs, one NIC each, on the edge switches
    flat = fat_tree(4)
    assert route(t, 0, 1) == [["s0g0->s0nvs", "s0nvs->s0g1"]]
    assert route(t, 0, 3) == [["s0g0->s0nic0", "s0nic0->edge0_0", "edge0_0->s1nic0", "s1nic0->s1g1"]]
    # server 0 -> server 15 (other pod): the flat host paths h0 -> h15 with each host replaced by
    # GPU -> NIC on the way out and NIC -> GPU on the way in; (k/2)^2 = 4 paths
    got = route(t, 1, 30)
    want = [[x.replace("h0->", "s0nic0->").replace("->h15", "->s15nic0") for x in p] for p in route(flat, 0, 15)]
    assert got == [["s0g1->s0nic0"] + p + ["s15nic0->s15g0"] for p in want] and len(got) == 4


@pytest.mark.parametrize("spec", ["rail:servers=3,gpus=4", "rail:servers=3,gpus=4,nics=2,pxn=0",
                                  "rail:servers=4,gpus=2,leaves_per_rail=2", "fat-tree:k=4,gpus=4",
                                  "full-mesh:tors=2,hosts=2,gpus=2,nics=2,pxn=1"])
def test_routes_keep_to_the_hierarchy(spec):
    # every path: inside one server only NVLink; between servers NVLink (PXN) then PCIe up, NIC,
    # fabric only, NIC, PCIe down; no GPU or NVSwitch of a third server, no GPU of the fabric part
    t = parse_topology(spec)
    lay, kinds = t.servers, t.link_kinds()
    node_server = {}
    for s in range(lay.S):
        node_server[int(lay.nvswitch[s])] = s
        for n in lay.nic_node[s].tolist():
            node_server[n] = s
        for h in lay.gpu_host[s].tolist():
            node_server[int(t._host_node[h])] = s
    for s in range(t.num_hosts):
        for d in range(t.num_hosts):
            if s == d:
                continue
            ss, sd = int(lay.server_of_host[s]), int(lay.server_of_host[d])
            for p in t.shortest_paths(s, d):
                k = kinds[p].tolist()
                nodes = t.link_src[p].tolist() + [int(t.link_dst[p[-1]])]
                assert {node_server.get(n, -1) for n in nodes} <= {ss, sd, -1}
                if ss == sd >= 0:
                    assert k == ["nvlink", "nvlink"]
                    continue
                inner = k[k.index("nic"):len(k) - k[::-1].index("nic")] if "nic" in k else k
                assert inner.count("nic") == (ss >= 0) + (sd >= 0)
                assert set(inner) <= {"nic", "fabric"}
                head = k[:k.index("nic")] if ss >= 0 else []
                assert head in (["pcie"], ["nvlink", "nvlink", "pcie"]) or ss < 0
                if head == ["nvlink", "nvlink", "pcie"]:    # PXN: the proxy has the destination's local index
                    assert lay.pxn and t.nodes[t.link_dst[p[1]]] == f"s{ss}g{lay.local_of_host[d]}"
                if sd >= 0:
                    assert k[-1] == "pcie" and int(p[-1]) == int(lay.pcie_down[sd, lay.local_of_host[d]])


def test_ecmp_paths_on_servers_hash_over_the_fabric():
    t = parse_topology("rail:servers=2,gpus=2,pxn=0")
    src, dst = np.zeros(64, int), np.full(64, 3)
    keys = np.column_stack([np.zeros(64, int), np.arange(64), np.zeros(64, int)])
    ptr, links = t.ecmp_paths(src, dst, keys)
    spines = {t.describe_link(int(links[ptr[f] + 2])) for f in range(64)}
    assert spines == {"r0l0->sp0", "r0l0->sp1"}            # both spines get flows


# ------------------------------------------------------------------ placement
def test_placement_on_servers():
    t = parse_topology("rail:servers=4,gpus=2")   # 8 GPUs (hosts 0..7), storage hosts 8, 9
    assert placement(t, 5, "first").tolist() == [0, 1, 2, 3, 4]
    for seed in range(5):
        p = placement(t, 5, "random", seed=seed)
        server, local = t.servers.server_of_host[p], t.servers.local_of_host[p]
        assert local.tolist() == [0, 1, 0, 1, 0]
        assert server[0] == server[1] and server[2] == server[3] and len(set(server.tolist())) == 3
    assert len({tuple(placement(t, 8, "random", seed=seed).tolist()) for seed in range(5)}) > 1
    assert placement(t, 3, "s1g1,st0,0").tolist() == [3, 8, 0]   # explicit lists still work
    with pytest.raises(TopologyError, match="9 ranks need 9 GPUs but .* has 8 \\(4 servers x 2\\)"):
        placement(t, 9, "first")
    with pytest.raises(TopologyError, match="9 ranks need 9 GPUs"):
        placement(t, 9, "random")


@pytest.mark.parametrize("spec", ["rail:servers=3,gpus=4", "rail:servers=3,gpus=4,nics=2,pxn=0",
                                  "fat-tree:k=4,gpus=2", "rail:servers=2,gpus=4,nics=2"])
def test_flow_nics_match_the_routes(spec):
    # the NIC ids flow_nics reports are those whose fabric cable the routed path crosses
    t = parse_topology(spec)
    lay = t.servers
    H = t.num_hosts
    src, dst = np.divmod(np.arange(H * H), H)
    out, into = lay.flow_nics(src, dst)
    up = {int(lk): i for i, lk in enumerate(lay.nic_up.ravel().tolist())}
    down = {int(lk): i for i, lk in enumerate(lay.nic_down.ravel().tolist())}
    for f in range(H * H):
        for p in t.shortest_paths(int(src[f]), int(dst[f])):
            assert [up[lk] for lk in p.tolist() if lk in up] == ([] if out[f] < 0 else [out[f]])
            assert [down[lk] for lk in p.tolist() if lk in down] == ([] if into[f] < 0 else [into[f]])
    assert repr(t).endswith(f"servers={lay.S}x{lay.G} GPUs, {lay.K} NICs each)")

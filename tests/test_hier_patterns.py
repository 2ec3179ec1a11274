"""NCCL's hierarchical ring and tree (``ring``/``nccl-tree`` with servers), checked against NCCL's
rules (connect.cc, trees.cc, search.cc) on small cases worked by hand."""

import tracemalloc

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.hier import server_shape, tree_channel_plan
from reactccl.algorithms.hier_ring import hier_ring_allreduce, ring_positions
from reactccl.algorithms.hier_tree import channel_parents, hier_tree_allreduce
from reactccl.algorithms.nccl_chunks import tree_chunk_bytes, tree_slices
from reactccl.algorithms.ring import ring_allreduce
from reactccl.algorithms.sizes import generate_bytes, pattern_size
from reactccl.algorithms.tree import flat_nccl_tree
from reactccl.pattern import PatternError

FIELDS = ("step", "src", "dst", "op", "chunk_ptr", "chunk_idx", "chunk_graph", "chunk_size")


def same_arrays(a, b, fields=FIELDS):
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields)


def channel_next(p, c):
    """{src: dst} of chunk graph c's flows (a ring: each rank sends to one rank)."""
    g = p.chunk_graph[p.chunk_idx[p.chunk_ptr[:-1]]]
    pairs = {(int(s), int(d)) for s, d in zip(p.src[g == c], p.dst[g == c], strict=True)}
    nxt = dict(pairs)
    assert len(nxt) == len(pairs), f"channel {c}: a rank sends to two ranks"
    return nxt


def channel_up(p, c):
    """{child: parent} from chunk graph c's reduce flows, and {parent: children} from its copies."""
    g = p.chunk_graph[p.chunk_idx[p.chunk_ptr[:-1]]]
    up, down = {}, {}
    for s, d, o in zip(p.src[g == c], p.dst[g == c], p.op[g == c], strict=True):
        if o == 0:
            assert up.setdefault(int(s), int(d)) == d, f"channel {c}: rank {s} has two parents"
        else:
            down.setdefault(int(s), set()).add(int(d))
    return up, down


# ------------------------------------------------------------------ shapes and intra orders
@pytest.mark.parametrize("G, K, firsts", [
    (8, 8, [0, 1, 2, 3, 4, 5, 6, 7]),   # one NIC per GPU: channel c starts at GPU c
    (8, 2, [0, 4, 0, 4]),               # NIC 1's first GPU is 4
    (8, 1, [0, 0]),                     # one shared NIC
    (8, 3, [0, 3, 6, 0]),               # ceil(k * 8 / 3): NIC 0 holds GPUs 0-2, NIC 1 3-5, NIC 2 6-7
    (4, 4, [0, 1, 2, 3]),
])
def test_channel_orders_start_next_to_the_channels_nic(G, K, firsts):
    shape = server_shape(G * 2, gpus=G, nics=K)
    orders = shape.channel_orders(len(firsts))
    assert orders[:, 0].tolist() == firsts
    for row in orders:                          # the rest follows g + 1 first (search.cc, NVSwitch)
        assert ((np.diff(row) % G) == 1).all()
    nic = shape.nic_of_local()
    assert nic[orders[:, 0]].tolist() == [c % K for c in range(len(firsts))]


def test_server_shape_defaults_and_errors():
    assert server_shape(12) == server_shape(12, servers=12, gpus=1, nics=1)
    assert server_shape(12, gpus=4) == server_shape(12, servers=3) == server_shape(12, servers=3, gpus=4, nics=4)
    for kw, words in [({"gpus": 5}, "gpus: 5 GPUs per server do not divide 12 ranks"),
                      ({"servers": 5}, "servers: 5 servers do not divide 12 ranks"),
                      ({"servers": 2, "gpus": 4}, "servers x gpus: 2 x 4 = 8, not the 12 ranks"),
                      ({"gpus": 4, "nics": 8}, "nics: 8 NICs per server exceed its 4 GPUs"),
                      ({"gpus": 0}, "gpus: expected an integer >= 1, got 0")]:
        with pytest.raises(PatternError, match=words):
            server_shape(12, **kw)
        with pytest.raises(PatternError, match=words):
            generate("ring", 12, **kw)


def test_bad_options_through_generate():
    with pytest.raises(PatternError, match="channels: hierarchy=flat builds the flat ring"):
        generate("ring", 8, gpus=4, channels=2, hierarchy="flat")
    with pytest.raises(PatternError, match="channels: hierarchy=flat builds the flat tree"):
        generate("nccl-tree", 8, channels=4, hierarchy="flat")
    with pytest.raises(PatternError, match="option hierarchy: expected one of servers, flat, got 'x'"):
        generate("ring", 8, hierarchy="x")
    with pytest.raises(PatternError, match="channels: expected an integer >= 1, got 0"):
        generate("nccl-tree", 8, gpus=2, channels=0)
    # options given as text, as from -O on a command line
    p = generate("ring", 8, gpus="4", nics="2", channels="3")
    assert p.name == "ring(servers=2,gpus=4,nics=2,channels=3)"


# ------------------------------------------------------------------ ring
def test_ring_2x4_channels_by_hand():
    # the module docstring's instance: => is the one edge leaving each server
    p = generate("ring", 8, gpus=4, channels=2)
    assert channel_next(p, 0) == {0: 1, 1: 2, 2: 3, 3: 4, 4: 5, 5: 6, 6: 7, 7: 0}
    assert channel_next(p, 1) == {1: 2, 2: 3, 3: 0, 0: 5, 5: 6, 6: 7, 7: 4, 4: 1}
    assert p.num_steps == 14 and p.num_flows == 2 * 14 * 8


def test_ring_3x2_shared_nic_by_hand():
    # K = 1: every channel enters each server at GPU 0 and leaves from GPU 1
    p = generate("ring", 6, servers=3, nics=1, channels=2)
    for c in (0, 1):
        assert channel_next(p, c) == {0: 1, 1: 2, 2: 3, 3: 4, 4: 5, 5: 0}


@pytest.mark.parametrize("S, G, K, C", [(2, 2, 2, 2), (3, 4, 4, 4), (4, 8, 8, 8), (4, 8, 1, 1), (3, 8, 2, 5),
                                        (2, 8, 8, 16), (1, 4, 4, 4), (4, 1, 1, 2)])
def test_ring_one_edge_per_server_per_channel_rail_aligned(S, G, K, C):
    p = generate("ring", S * G, servers=S, gpus=G, nics=K, channels=C)
    shape = server_shape(S * G, S, G, K)
    assert p.num_steps == 2 * (S * G - 1) and p.num_flows == C * 2 * (S * G - 1) * S * G
    nic = shape.nic_of_local()
    for c in range(C):
        nxt = channel_next(p, c)
        assert sorted(nxt) == list(range(S * G)) and sorted(nxt.values()) == list(range(S * G))
        cross = {s: d for s, d in nxt.items() if s // G != d // G}
        if S == 1:
            assert cross == {}
            continue
        assert sorted(s // G for s in cross) == list(range(S))            # one edge leaves each server
        for s, d in cross.items():
            assert d // G == (s // G + 1) % S                             # servers in server order
            assert nic[d % G] == c % K and d % G == shape.nic_gpu(c % K)  # enters next to NIC c mod K
            assert (s % G + 1) % G == d % G                               # the last GPU of the chain
    # chunk fractions: every flow carries one chunk of 1/(C N); channel c holds chunks c*N..c*N+N-1
    assert np.allclose(p.chunk_size, 1 / (C * S * G)) and (np.diff(p.chunk_ptr) == 1).all()
    assert p.chunk_graph.tolist() == np.repeat(np.arange(C), S * G).tolist()


def test_ring_step_chunks_follow_the_flat_rule_on_positions():
    # channel 1 of 2 x 4: ring positions 1 2 3 0 5 6 7 4; at step s position p sends chunk (p-1-s) mod 8
    p = generate("ring", 8, gpus=4, channels=2)
    perm = ring_positions(server_shape(8, gpus=4), 2)[1]
    assert perm.tolist() == [1, 2, 3, 0, 5, 6, 7, 4]
    for s in (0, 3, 7, 13):
        sel = (p.step == s) & (p.chunk_graph[p.chunk_idx] == 1)
        got = {(int(a), int(b)) for a, b in zip(p.src[sel], p.chunk_idx[sel], strict=True)}
        want = {(int(perm[q]), 8 + (q - 1 - s) % 8) for q in range(8)}
        assert got == want
        assert (p.op[sel] == (1 if s >= 7 else 0)).all()


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_ring_with_one_gpu_per_server_is_the_flat_ring(n):
    flat = generate("ring", n)
    for kw in ({}, {"gpus": 1}, {"servers": n}, {"gpus": 1, "channels": 1}, {"gpus": 4 if n == 8 else 1,
                                                                              "hierarchy": "flat"}):
        q = generate("ring", n, **kw)
        assert same_arrays(q, flat) and q.name == "ring"
    # the hierarchical builder itself gives the same flows; only the chunk graphs differ (one per
    # channel instead of one per chunk)
    h = hier_ring_allreduce(server_shape(n), 1)
    assert same_arrays(h, flat, FIELDS[:-2]) and h.chunk_graph.tolist() == [0] * n


# ------------------------------------------------------------------ tree
def test_tree_4x2_channels_by_hand():
    # servers' trees (trees.cc): tree 0 = btree(4) parents [-1, 2, 0, 2], tree 1 its mirror [1, 3, 1, -1]
    # channels 0, 1: tree 0 on NIC 0 (heads 0 2 4 6) and NIC 1 (heads 1 3 5 7); channels 2, 3: tree 1
    want = [[-1, 0, 4, 2, 0, 4, 4, 6],
            [1, -1, 3, 5, 5, 1, 7, 5],
            [2, 0, 6, 2, 2, 4, -1, 6],
            [1, 3, 3, 7, 5, 3, 7, -1]]
    shape = server_shape(8, gpus=2)
    assert channel_parents(shape, 4).tolist() == want
    p = generate("nccl-tree", 8, gpus=2)                  # default channels 2K = 4, 1 slice
    assert p.name == "nccl-tree(servers=4,gpus=2,nics=2,channels=4,slices=1)"
    for c, parent in enumerate(want):
        up, down = channel_up(p, c)
        assert up == {r: q for r, q in enumerate(parent) if q >= 0}
        assert down == {q: {r for r, x in enumerate(parent) if x == q} for q in set(parent) if q >= 0}
    # depth D = (G - 1) + depth of btree(4) = 1 + 2; 2D steps with one slice
    assert p.num_steps == 6 and p.num_flows == 4 * 2 * 7


def test_tree_3x2_shared_nic_by_hand():
    # S = 3 is odd: tree 1 is tree 0 shifted by one (parents [-1, 2, 0] -> [1, -1, 0])
    p = generate("nccl-tree", 6, servers=3, nics=1)
    assert channel_up(p, 0)[0] == {1: 0, 2: 4, 3: 2, 4: 0, 5: 4}
    assert channel_up(p, 1)[0] == {0: 2, 1: 0, 3: 2, 4: 0, 5: 4}


def test_tree_channel_plan_odd_channels():
    shape = server_shape(16, gpus=8, nics=8)
    for C, trees, nics in [(1, [0], [0]), (3, [0, 0, 1], [0, 1, 0]), (4, [0, 0, 1, 1], [0, 1, 0, 1]),
                           (5, [0, 0, 0, 1, 1], [0, 1, 2, 0, 1]), (16, [0] * 8 + [1] * 8, list(range(8)) * 2)]:
        t, k = tree_channel_plan(shape, C)
        assert t.tolist() == trees and k.tolist() == nics


@pytest.mark.parametrize("S, G, K, C, slices", [(3, 4, 4, 8, 1), (4, 8, 8, 16, 2), (4, 8, 1, 2, 3), (2, 2, 2, 3, 2),
                                                (1, 8, 8, 4, 1), (5, 2, 1, 1, 1)])
def test_tree_chains_and_heads(S, G, K, C, slices):
    p = generate("nccl-tree", S * G, servers=S, gpus=G, nics=K, channels=C, slices=slices)
    shape = server_shape(S * G, S, G, K)
    trees, nics = tree_channel_plan(shape, C)
    server_depth = (S - 1).bit_length()      # btree(S): root 0 -> 2^floor(log2(S-1)) -> ... -> an odd leaf
    D = G - 1 + server_depth
    assert p.num_steps == 2 * D + slices - 1 and p.num_flows == C * slices * 2 * (S * G - 1)
    for c in range(C):
        up, _ = channel_up(p, c)
        head = shape.nic_gpu(int(nics[c]))
        for child, parent in up.items():
            if child // G == parent // G:                                  # chain: the previous GPU
                assert (parent % G + 1) % G == child % G and child % G != head
            else:                                                          # heads only cross servers
                assert child % G == head and parent % G == head
        assert len([r for r in range(S * G) if r not in up]) == 1          # one root
    assert np.allclose(p.chunk_size, 1 / (C * slices))


@pytest.mark.parametrize("n", [1, 2, 3, 6, 8, 13])
@pytest.mark.parametrize("slices", [1, 3])
def test_tree_with_one_gpu_per_server_is_the_flat_tree(n, slices):
    flat = flat_nccl_tree(n, slices)
    assert same_arrays(hier_tree_allreduce(server_shape(n), 2, slices), flat)
    assert same_arrays(generate("nccl-tree", n, gpus=1, channels=2, slices=slices), flat)
    # size-aware default: the same NCCL chunk rule
    for size in (20e6, float(128 << 20)):
        assert same_arrays(generate("nccl-tree", n, size=size), generate("nccl-tree", n, servers=n, size=size))


def test_tree_chunk_rule_on_servers():
    # depth = G - 1 + log2i(S): 4 x 8 -> 7 + 2 = 9, 16 channels
    assert tree_chunk_bytes(1 << 30, 32, 16, gpus=8) == 512 << 10 and tree_slices(1 << 30, 32, 16, 8) == 128
    # 128 MiB: 16, 32, 64 chunks per channel stay below 8 x 9 = 72 until the chunk is 128 KiB
    assert tree_chunk_bytes(128 << 20, 32, 16, gpus=8) == 128 << 10 and tree_slices(128 << 20, 32, 16, 8) == 64
    p = generate("nccl-tree", 32, gpus=8, size=float(128 << 20))
    assert p.name.endswith("channels=16,slices=64)") and p.num_chunks == 16 * 64
    with pytest.raises(ValueError, match="gpus: 3 per node do not divide 32 ranks"):
        tree_chunk_bytes(1e6, 32, 2, gpus=3)


# ------------------------------------------------------------------ sizes
@pytest.mark.parametrize("name, n, opts", [("ring", 16, {"gpus": 4}),
                                           ("ring", 24, {"gpus": 8, "nics": 2, "channels": 3}),
                                           ("nccl-tree", 24, {"gpus": 4, "channels": 3, "slices": 2}),
                                           ("nccl-tree", 32, {"gpus": 8, "size": float(128 << 20)}),
                                           ("ring", 8, {"gpus": 4, "hierarchy": "flat"})])
def test_size_estimates_bound_the_servers_patterns(name, n, opts):
    p = generate(name, n, **opts)
    chunks, pairs = pattern_size(name, n, opts)
    assert p.num_chunks == chunks and len(p.chunk_idx) <= pairs <= 2 * len(p.chunk_idx) + 4 * n


def test_direct_calls_keep_the_flat_defaults():
    assert same_arrays(ring_allreduce(6), generate("ring", 6))


@pytest.mark.parametrize("name, n, opts", [("ring", 128, {"gpus": 8}), ("nccl-tree", 256, {"gpus": 8, "size": 64e6})])
def test_generate_estimate_bounds_the_measured_peak_on_servers(name, n, opts):
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    generate(name, n, **opts)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    est = generate_bytes(name, n, opts)
    assert peak <= est <= 8 * peak + (2 << 20), (peak, est)

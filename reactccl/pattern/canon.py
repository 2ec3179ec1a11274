"""Canonical forms of patterns: merged chunks, earliest steps, renumbered chunk graphs.

Two patterns "do the same thing" when they move the same data between the same ranks in the
same order; they may still differ in how finely the message is cut (two neighbouring chunks
that always travel together), in step numbering (:func:`reactccl.pattern.steps.normalize_steps`)
in chunk-graph ids, and in whether one (step, src, dst) transfer is one flow or several. :func:`canonical` removes those three freedoms, so
``canonical(a) == canonical(b)`` is the round-trip test of an exporter and importer.
"""

from __future__ import annotations

import numpy as np

from .ir import CollectivePattern
from .steps import normalize_steps

__all__ = ["merge_chunks", "merge_flows", "split_runs", "renumber_graphs", "canonical"]


def split_runs(p: CollectivePattern) -> CollectivePattern:
    """``p`` with each flow cut into one flow per run of consecutive chunk ids (what one MSCCL
    send step carries)."""
    if p.num_flows == 0:
        return p
    order = np.lexsort((p.chunk_idx, p.pair_flow))
    ch, fl = p.chunk_idx[order], p.pair_flow[order]
    new = np.concatenate(([True], (fl[1:] != fl[:-1]) | (ch[1:] != ch[:-1] + 1)))
    if new.sum() == p.num_flows:
        return p
    starts = np.flatnonzero(new)
    owner = fl[starts]
    ptr = np.concatenate((starts, [len(ch)]))
    return CollectivePattern.from_arrays(p.collective, p.num_ranks, p.chunk_size, p.chunk_graph, p.step[owner],
                                         p.src[owner], p.dst[owner], p.op[owner], ptr, ch, root=p.root, name=p.name)


def merge_flows(p: CollectivePattern) -> CollectivePattern:
    """``p`` with flows of one step, one (src, dst) pair, one op and one chunk graph and disjoint
    chunks joined into one flow (the same transfers, fewer messages)."""
    if p.num_flows == 0:
        return p
    key = np.stack([p.step, p.src, p.dst, p.op.astype(np.int64), p.flow_graph], axis=1)
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    if len(first) == p.num_flows:
        return p
    pairs = np.stack([inv[p.pair_flow], p.chunk_idx], axis=1)
    if len(np.unique(pairs, axis=0)) != len(pairs):
        return p        # two such flows share a chunk: joining them would change the pattern
    order = np.argsort(np.argsort(first))            # groups in order of their first flow
    g = order[inv]
    srt = np.lexsort((p.chunk_idx, g[p.pair_flow]))
    idx = p.chunk_idx[srt]
    ptr = np.concatenate(([0], np.cumsum(np.bincount(g[p.pair_flow], minlength=len(first)))))
    rep = np.empty(len(first), dtype=np.int64)
    rep[order] = first
    return CollectivePattern.from_arrays(p.collective, p.num_ranks, p.chunk_size, p.chunk_graph, p.step[rep],
                                         p.src[rep], p.dst[rep], p.op[rep], ptr, idx, root=p.root, name=p.name)


def merge_chunks(p: CollectivePattern) -> CollectivePattern:
    """``p`` with each run of neighbouring chunks that are carried by exactly the same flows, lie
    in one chunk graph and (AllGather/ReduceScatter/AllToAll) in one block merged into one chunk."""
    C, n = p.num_chunks, p.num_ranks
    order = np.lexsort((p.pair_flow, p.chunk_idx))
    ch_sorted = p.chunk_idx[order]
    fl_sorted = p.pair_flow[order]
    bounds = np.searchsorted(ch_sorted, np.arange(C + 1))
    members = [tuple(fl_sorted[bounds[c]:bounds[c + 1]].tolist()) for c in range(C)]
    block = p.chunk_block
    new_id = np.zeros(C, dtype=np.int64)
    for c in range(1, C):
        same = (members[c] == members[c - 1] and p.chunk_graph[c] == p.chunk_graph[c - 1]
                and (not p.collective.is_blocked or block[c] == block[c - 1]))
        new_id[c] = new_id[c - 1] + (0 if same else 1)
    if new_id[-1] == C - 1:
        return p
    M = int(new_id[-1]) + 1
    size = np.bincount(new_id, weights=p.chunk_size, minlength=M)
    graph = np.zeros(M, dtype=np.int64)
    graph[new_id] = p.chunk_graph
    keep = np.concatenate(([True], new_id[1:] != new_id[:-1]))   # first chunk of each merged run
    idx_keep = keep[p.chunk_idx]
    idx = new_id[p.chunk_idx[idx_keep]]
    counts = np.bincount(p.pair_flow[idx_keep], minlength=p.num_flows)
    ptr = np.concatenate(([0], np.cumsum(counts)))
    return CollectivePattern.from_arrays(p.collective, n, size, graph, p.step, p.src, p.dst, p.op, ptr, idx,
                                         root=p.root, name=p.name)


def renumber_graphs(p: CollectivePattern) -> CollectivePattern:
    """``p`` with chunk-graph ids renumbered 0, 1, ... in order of their first chunk."""
    _, first, inv = np.unique(p.chunk_graph, return_index=True, return_inverse=True)
    rank_of = np.argsort(np.argsort(first))
    graph = rank_of[inv]
    return CollectivePattern.from_arrays(p.collective, p.num_ranks, p.chunk_size, graph, p.step, p.src, p.dst,
                                         p.op, p.chunk_ptr, p.chunk_idx, root=p.root, name=p.name)


def canonical(p: CollectivePattern) -> CollectivePattern:
    """Flows cut into runs of consecutive chunks, then joined again per (step, src, dst, op, graph), merged chunks, earliest steps, graphs renumbered (repeated until nothing
    changes): equal for patterns that do the same thing."""
    for _ in range(4):
        q = renumber_graphs(merge_chunks(merge_flows(normalize_steps(split_runs(p)))))
        if q.canonical_key() == p.canonical_key():
            return q
        p = q
    return p

"""Compact views of a pattern for people: trees as nested text, and which rank moved to which position.

Used by ``reactccl demo`` to show a pattern before and after REACT. Positions are the
ranks of the initial pattern: REACT's swaps are relabellings that keep flow ``i`` as
flow ``i``, so comparing flow endpoints of the initial and the final pattern shows
which rank now plays which position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..pattern import CollectivePattern

__all__ = ["tree_parents", "tree_text", "pattern_view", "moved_positions", "busiest_receiver"]


def tree_parents(pattern: CollectivePattern, graph: int) -> np.ndarray | None:
    """Parent of each rank in chunk graph ``graph`` from its reduce flows (child -> parent),
    shape ``(N,)`` with -1 for the root and for ranks outside the graph; None if the graph is
    not a tree pattern: the reduce flows do not form one tree (a rank with two parents, or no
    reduce flows), or copy flows do not run back down the same tree (after a window swap of
    REACT's ③ the broadcast may use other parents than the reduce)."""
    g = pattern.flow_graph == graph
    sel = g & (pattern.op == 0)
    if not sel.any():
        return None
    parent = np.full(pattern.num_ranks, -1, dtype=np.int64)
    up = set(zip(pattern.src[sel].tolist(), pattern.dst[sel].tolist()))
    down = set(zip(pattern.dst[g & (pattern.op == 1)].tolist(), pattern.src[g & (pattern.op == 1)].tolist()))
    if down and down != up:
        return None
    for c, p in up:
        if parent[c] not in (-1, p):
            return None
        parent[c] = p
    nodes = set(pattern.src[sel].tolist()) | set(pattern.dst[sel].tolist())
    roots = [r for r in nodes if parent[r] < 0]
    return parent if len(roots) == 1 else None


def tree_text(parent: np.ndarray, mark: Iterable[int] = (), style: str = "bold red") -> str:
    """A tree as nested text, ``root(child(grandchild ...) child)``, children in rank order;
    ranks in ``mark`` wrapped in rich markup ``[style]r[/]``. E.g. NCCL's tree 0 on 8 ranks
    is ``0(4(2(1 3) 6(5 7)))``."""
    parent = np.asarray(parent)
    marked = set(int(m) for m in mark)
    kids: dict[int, list[int]] = {}
    for c, p in enumerate(parent.tolist()):
        if p >= 0:
            kids.setdefault(p, []).append(c)
    nodes = set(kids) | {c for cs in kids.values() for c in cs}
    roots = sorted(r for r in nodes if parent[r] < 0)

    def text(r: int) -> str:
        label = f"[{style}]{r}[/]" if r in marked else str(r)
        cs = kids.get(r, [])
        return label + ("(" + " ".join(text(c) for c in sorted(cs)) + ")" if cs else "")

    return " ".join(text(r) for r in roots)


def pattern_view(pattern: CollectivePattern, mark: Iterable[int] = ()) -> list[tuple[str, str]]:
    """``(label, text)`` per chunk graph: the nested tree when the graph is a tree pattern
    (:func:`tree_parents`), else its flows per step, ``t0: src>dst ... | t1: ...`` (``+``
    reduce, ``=`` copy)."""
    out = []
    mark = list(mark)
    for g in sorted(pattern.chunk_graphs()):
        parent = tree_parents(pattern, g)
        if parent is not None:
            out.append((f"tree {g}", tree_text(parent, mark)))
            continue
        sel = np.flatnonzero(pattern.flow_graph == g)
        steps = []
        for t in sorted(set(pattern.step[sel].tolist())):
            fl = sel[pattern.step[sel] == t]
            steps.append(f"t{t}: " + " ".join(f"{pattern.src[i]}>{pattern.dst[i]}{'+' if pattern.op[i] == 0 else '='}"
                                              for i in fl))
        out.append((f"graph {g}", " | ".join(steps)))
    return out


def moved_positions(before: CollectivePattern, after: CollectivePattern) -> list[dict[str, Any]]:
    """Where ranks moved: per chunk graph, each position (the rank that held it in ``before``)
    now held by other rank(s) in ``after``.

    Returns:
        ``[{"graph": g, "position": p, "ranks": [r, ...]}]`` for positions whose holder changed
        (more than one rank if single TEN positions of ``p`` were swapped apart).

    Raises:
        ValueError: the patterns do not have the same flows in the same order (steps, ops, chunks).
    """
    if before.num_flows != after.num_flows or not (np.array_equal(before.step, after.step)
                                                   and np.array_equal(before.op, after.op)
                                                   and np.array_equal(before.flow_graph, after.flow_graph)):
        raise ValueError("moved_positions: the patterns are not relabellings of one another")
    held: dict[tuple[int, int], set[int]] = {}
    for a, b, g in ((before.src, after.src, before.flow_graph), (before.dst, after.dst, before.flow_graph)):
        for p, r, gg in zip(a.tolist(), b.tolist(), g.tolist()):
            held.setdefault((gg, p), set()).add(r)
    return [{"graph": g, "position": p, "ranks": sorted(rs)} for (g, p), rs in sorted(held.items())
            if rs != {p}]


def busiest_receiver(pattern: CollectivePattern) -> int:
    """The rank whose congested downlink should hurt most: the most flows received in one step,
    then (tree patterns) the largest subtree below it in any chunk graph's tree, then the most
    flows received in all, then the lowest rank. For NCCL's 8-rank double tree: rank 3 (the
    root's only child in tree 1, receiving from 1 and 5 at once)."""
    n = pattern.num_ranks
    per_step = np.zeros((max(pattern.num_steps, 1), n), dtype=np.int64)
    np.add.at(per_step, (pattern.step, pattern.dst), 1)
    peak = per_step.max(axis=0)
    total = np.bincount(pattern.dst, minlength=n)
    below = np.zeros(n, dtype=np.int64)
    for g in pattern.chunk_graphs():
        parent = tree_parents(pattern, g)
        if parent is None:
            continue
        size = np.zeros(n, dtype=np.int64)
        for r in range(n):  # every rank adds 1 to each of its ancestors
            a = parent[r]
            while a >= 0:
                size[a] += 1
                a = parent[a]
        below = np.maximum(below, size)
    order = np.lexsort((np.arange(n), -total, -below, -peak))
    return int(order[0])

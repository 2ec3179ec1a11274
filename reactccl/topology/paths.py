"""Every fewest-hop path between two nodes of a directed graph, found with compiled BFS.

:class:`FewestHops` answers "all shortest (fewest-link) paths from node ``s`` to node ``d``" as
an array of link ids, one row per path, rows in lexicographic order of link ids. It is what
:meth:`reactccl.topology.Topology.shortest_paths` and ECMP use (REACT §7.3: flows take
fewest-hop paths and ECMP hashes among them).

How: one breadth-first search per source node gives hop distances to every node
(``scipy.sparse.csgraph.shortest_path`` with ``unweighted=True``, C code, many sources per call).
A link ``u->v`` lies on a fewest-hop path to ``d`` exactly when ``dist[u] + 1 == dist[v]`` and
``v`` leads on to ``d``; walking back from ``d`` over such links, one level at a time for all
partial paths at once (numpy), lists every path. These are the paths of the predecessor DAG that
``networkx.predecessor`` builds, so :func:`nx_fewest_hop_paths` (kept as the reference, and
tested equal on every builder) gives the same rows in the same order.

Cost: a BFS is O(V + E) in C; a pair's enumeration is O(paths x hops) in numpy. Distances are
kept only while one call runs (V floats per source); the path table of every pair asked for is
cached (m x hops int64).
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

__all__ = ["FewestHops", "nx_fewest_hop_paths"]

_BLOCK_BYTES = 64 << 20   # distances of at most this many bytes per BFS call (sources in blocks)


class FewestHops:
    """All fewest-hop paths over a subset of a graph's directed links.

    Args:
        num_nodes: V; node ids are ``0..V-1``.
        link_src, link_dst: node ids of every link of the graph, shape ``(L,)``.
        links: the link ids that may be used (default all); paths use only these.

    Attributes:
        links: the usable link ids, shape ``(L',)``.

    Raises:
        ValueError: two usable links with the same ends (a path is a sequence of links, and a
            DiGraph has one link per ordered pair), or a node id out of range.
    """

    def __init__(self, num_nodes: int, link_src: np.ndarray, link_dst: np.ndarray,
                 links: np.ndarray | None = None) -> None:
        V = int(num_nodes)
        src_all = np.asarray(link_src, dtype=np.int64)
        dst_all = np.asarray(link_dst, dtype=np.int64)
        self.links = np.arange(len(src_all), dtype=np.int64) if links is None else np.asarray(links, np.int64)
        src, dst = src_all[self.links], dst_all[self.links]
        if src.size and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= V):
            raise ValueError(f"FewestHops: a link end is out of range 0..{V - 1}")
        if np.unique(src * V + dst).size != src.size:
            raise ValueError("FewestHops: two links join the same ordered pair of nodes")
        self.num_nodes = V
        self._adj = csr_matrix((np.ones(src.size), (src, dst)), shape=(V, V))
        self._adj.sort_indices()
        self._out_ptr, self._out_nbr = self._adj.indptr.astype(np.int64), self._adj.indices.astype(np.int64)
        order = np.argsort(dst, kind="stable")           # in-links of each node, grouped by head
        self._in_link = self.links[order]
        self._in_src = src[order]
        self._in_ptr = np.searchsorted(dst[order], np.arange(V + 1))
        self._cache: dict[tuple[int, int], np.ndarray] = {}

    def distances(self, sources: Sequence[int] | np.ndarray) -> np.ndarray:
        """Hop distances from each source to every node, shape ``(len(sources), V)`` (inf where
        unreachable).

        A path from ``s`` to ``v != s`` starts with a link to a successor ``u`` of ``s``, and a
        shortest one continues on a shortest path from ``u`` that does not come back through
        ``s``; so ``dist_s(v) = 1 + min over u of dist_u(v)``. Where the sources share fewer
        successors than there are sources (hosts under one edge switch, NICs under one leaf) the
        searches start from the successors instead: 64 searches instead of 1024 for 1024 hosts
        of a fat-tree of k = 32.
        """
        s = np.asarray(sources, dtype=np.int64).reshape(-1)
        lo, hi = self._out_ptr[s], self._out_ptr[s + 1]
        ranges = [np.arange(a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]
        succ = np.unique(self._out_nbr[np.concatenate(ranges or [np.zeros(0, np.int64)])])
        if len(succ) >= len(s):
            return self._bfs(s)
        via = self._bfs(succ)
        out = np.full((len(s), self.num_nodes), np.inf)
        for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            rows = np.searchsorted(succ, self._out_nbr[a:b])
            if len(rows) == 1:
                np.add(via[rows[0]], 1.0, out=out[i])
            elif len(rows):
                np.add(via[rows].min(axis=0), 1.0, out=out[i])
            out[i, s[i]] = 0.0
        return out

    def _bfs(self, sources: np.ndarray) -> np.ndarray:
        """Hop distances by one compiled search per source (``scipy.sparse.csgraph``), ``(len, V)``."""
        return shortest_path(self._adj, method="D", directed=True, unweighted=True, indices=sources).reshape(
            len(sources), self.num_nodes)

    def tables(self, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray) -> list[np.ndarray | None]:
        """Path tables of node pairs: for pair ``i`` an int64 array ``(m, hops)`` of link ids, rows
        sorted lexicographically, read-only; ``None`` where ``dst[i]`` cannot be reached. A node
        to itself has one empty path, shape ``(1, 0)``. Tables are cached per pair."""
        src = np.asarray(src, dtype=np.int64).reshape(-1)
        dst = np.asarray(dst, dtype=np.int64).reshape(-1)
        out: list[np.ndarray | None] = [self._cache.get((int(s), int(d))) for s, d in zip(src, dst, strict=True)]
        todo = [i for i, t in enumerate(out) if t is None]
        if not todo:
            return out
        need_src = np.unique(src[todo])
        block = max(1, _BLOCK_BYTES // (8 * max(self.num_nodes, 1)))
        by_src: dict[int, list[int]] = {}
        for i in todo:
            by_src.setdefault(int(src[i]), []).append(i)
        for b in range(0, len(need_src), block):
            chunk = need_src[b:b + block]
            dist = self.distances(chunk)
            for row, s in enumerate(chunk.tolist()):
                for i in by_src[s]:
                    d = int(dst[i])
                    key = (s, d)
                    table = self._cache.get(key)
                    if table is None:
                        table = self._enumerate(dist[row], d)
                        if table is not None:
                            self._cache[key] = table
                    out[i] = table
        return out

    def _enumerate(self, dist: np.ndarray, d: int) -> np.ndarray | None:
        """Every path to ``d`` along links that step the BFS distance ``dist`` up by one, sorted."""
        level = dist[d]
        if not np.isfinite(level):
            return None
        hops = int(level)
        heads = np.array([d], dtype=np.int64)
        rev = np.zeros((1, hops), dtype=np.int64)   # column j: the link j steps before d, filled backwards
        for j in range(hops):
            lo, hi = self._in_ptr[heads], self._in_ptr[heads + 1]
            count = hi - lo
            owner = np.repeat(np.arange(len(heads)), count)
            idx = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(int(count.sum()))
            keep = dist[self._in_src[idx]] == hops - j - 1
            owner, idx = owner[keep], idx[keep]
            rev = rev[owner]
            rev[:, j] = self._in_link[idx]
            heads = self._in_src[idx]
        paths = rev[:, ::-1]
        paths = paths[np.lexsort(paths.T[::-1])] if hops and len(paths) > 1 else paths
        paths = np.ascontiguousarray(paths)
        paths.flags.writeable = False
        return paths


def nx_fewest_hop_paths(graph: nx.DiGraph, link_of: dict[tuple, int], src, dst,
                        pred: dict | None = None) -> np.ndarray | None:
    """The reference: every fewest-hop path from node ``src`` to node ``dst`` of ``graph`` as link
    ids (``link_of[(u, v)]``), rows sorted, shape ``(m, hops)``; None if unreachable. Walks the
    BFS predecessor lists ``pred = networkx.predecessor(graph, src)`` (computed when not given)
    back from ``dst``, as routing did before :class:`FewestHops` (one search per source: about
    50 ms on a fat-tree of k = 32)."""
    if pred is None:
        pred = nx.predecessor(graph, src)
    if dst not in pred:
        return None
    paths: list[list[int]] = []
    stack: list[tuple[object, list[int]]] = [(dst, [])]
    while stack:
        node, tail = stack.pop()
        ps = pred[node]
        if not ps:
            paths.append(tail[::-1])
            continue
        for p in ps:
            stack.append((p, tail + [link_of[(p, node)]]))
    return np.array(sorted(paths), dtype=np.int64).reshape(len(paths), -1)

"""The collective-pattern IR: a time-expanded network (TEN) stored as numpy arrays.

A pattern with F flows and C chunks keeps one entry per flow in the arrays
``step``, ``src``, ``dst``, ``op`` (int32/int8, shape ``(F,)``) and the chunks of
flow ``f`` in ``chunk_idx[chunk_ptr[f]:chunk_ptr[f+1]]`` (CSR layout). Chunks
are ``chunk_size`` (fractions of the message, shape ``(C,)``) and
``chunk_graph`` (chunk-graph ids). Rich :class:`Flow` objects are built on
demand for the few places that want them.

Source: REACT §5.1 (TEN), DESIGN.md "The pattern IR".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property

import numpy as np

from .types import Chunk, Collective, Flow, Op, PatternError

__all__ = ["CollectivePattern", "MAX_INDEX"]

SIZE_TOL = 1e-9
# Ranks, chunk ids, chunk-graph ids and steps are below 2^31, so the products the IR forms of
# them (e.g. (rank * C + chunk) keys) fit in int64 (:meth:`CollectivePattern.dependencies`).
MAX_INDEX = (1 << 31) - 1
# degrees() refuses to build (T, N) tables larger than this many bytes
MAX_DEGREE_BYTES = 1 << 30


_ENDPOINT_FREE = ("pair_flow", "flow_fraction", "flow_graph", "chunk_block")

#: Patterns whose :meth:`CollectivePattern.dependencies` a process builds with the numpy reference
#: before it switches to the compiled kernel (``pattern/deps.py``). The reference takes
#: 0.3 ms on an 8-rank tree and 27 ms on a 256-rank ring (compiled: 0.04 and 18 ms), the kernel about
#: 5.5 s of CPU to compile once per install: a simulation builds the lists of a few patterns and
#: never pays it; the tuner, which builds thousands, switches.
DEPS_COMPILED_AFTER = 2000
_deps_calls = [0]


def _block_tol(num_chunks: int, num_blocks: int) -> float:
    """Tolerance, in blocks, of a chunk boundary computed by a cumulative sum of ``num_chunks``
    fractions scaled by ``num_blocks``: :data:`SIZE_TOL` plus the sum's rounding (an AllToAll of 70
    ranks in 9800 chunks is 1e-9 of a block off)."""
    return SIZE_TOL + 4.0 * num_chunks * num_blocks * float(np.finfo(np.float64).eps)


def _as_int_array(values, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise PatternError(f"{name}: expected integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False).reshape(-1)


class CollectivePattern:
    """A collective as data: who sends which chunks to whom at which step.

    Construct from :class:`Flow` objects (``CollectivePattern(collective, n,
    chunks, flows)``) or from arrays (:meth:`from_arrays`). The constructor
    checks structure (ranks in range, no self-flows, steps >= 0, chunk ids,
    one chunk graph per flow, sizes summing to 1, blocks for AllGather and
    ReduceScatter); :func:`reactccl.pattern.verify` checks semantics.

    Flows keep the order they were given in; flow ``i`` of a relabelled
    pattern is the same TEN position as flow ``i`` of the original.

    Raises:
        PatternError: naming the field and index that is wrong.
    """

    def __init__(
        self,
        collective: Collective | str,
        num_ranks: int,
        chunks: Sequence[Chunk],
        flows: Iterable[Flow],
        root: int | None = None,
        name: str = "",
    ) -> None:
        flows = list(flows)
        ptr = np.zeros(len(flows) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum([len(f.chunks) for f in flows])
        idx = [c for f in flows for c in f.chunks]
        self._init(
            collective,
            num_ranks,
            [c.size for c in chunks],
            [c.graph for c in chunks],
            [f.step for f in flows],
            [f.src for f in flows],
            [f.dst for f in flows],
            [Op(f.op).code for f in flows],
            ptr,
            idx,
            root,
            name,
            chunk_ids=[c.id for c in chunks],
        )

    @classmethod
    def from_arrays(
        cls,
        collective: Collective | str,
        num_ranks: int,
        chunk_size: Sequence[float] | np.ndarray,
        chunk_graph: Sequence[int] | np.ndarray,
        step: Sequence[int] | np.ndarray,
        src: Sequence[int] | np.ndarray,
        dst: Sequence[int] | np.ndarray,
        op: Sequence[int] | np.ndarray,
        chunk_ptr: Sequence[int] | np.ndarray,
        chunk_idx: Sequence[int] | np.ndarray,
        root: int | None = None,
        name: str = "",
        check: bool = True,
    ) -> "CollectivePattern":
        """Build a pattern from flat arrays (the fast path for generators).

        Args:
            chunk_size, chunk_graph: shape ``(C,)``.
            step, src, dst, op: shape ``(F,)``; ``op`` uses 0 = reduce, 1 = copy.
            chunk_ptr: shape ``(F+1,)``, CSR offsets into ``chunk_idx``.
            check: run the structural checks (leave True unless the arrays
                come from another, already checked pattern).
        """
        self = cls.__new__(cls)
        self._init(collective, num_ranks, chunk_size, chunk_graph, step, src, dst,
                   op, chunk_ptr, chunk_idx, root, name, check=check)
        return self

    def _init(self, collective, num_ranks, chunk_size, chunk_graph, step, src, dst, op,
              chunk_ptr, chunk_idx, root, name, chunk_ids=None, check=True) -> None:
        try:
            self.collective = Collective(collective)
        except ValueError:
            raise PatternError(
                f"collective: unknown collective {collective!r}; expected one of "
                f"{[c.value for c in Collective]}") from None
        if (isinstance(num_ranks, bool) or not isinstance(num_ranks, (int, np.integer))
                or not 1 <= num_ranks <= MAX_INDEX):
            raise PatternError(f"num_ranks: expected an integer in 1..{MAX_INDEX}, got {num_ranks!r}")
        self.num_ranks = int(num_ranks)
        self.root = None if root is None else int(root)
        self.name = str(name)
        self.chunk_size = np.asarray(chunk_size, dtype=np.float64).reshape(-1)
        self.chunk_graph = _as_int_array(chunk_graph, "chunk graph")
        self.step = _as_int_array(step, "flow step")
        self.src = _as_int_array(src, "flow src")
        self.dst = _as_int_array(dst, "flow dst")
        self.op = _as_int_array(op, "flow op").astype(np.int8)
        self.chunk_ptr = _as_int_array(chunk_ptr, "chunk_ptr")
        self.chunk_idx = _as_int_array(chunk_idx, "flow chunks")
        for arr in (self.chunk_size, self.chunk_graph, self.step, self.src, self.dst,
                    self.op, self.chunk_ptr, self.chunk_idx):
            arr.flags.writeable = False
        if check:
            self._check(chunk_ids)

    # ------------------------------------------------------------------ checks
    def _check(self, chunk_ids) -> None:
        n, C, F = self.num_ranks, len(self.chunk_size), len(self.step)
        coll = self.collective
        if coll.needs_root:
            if self.root is None or not 0 <= self.root < n:
                raise PatternError(f"root: {coll.value} needs a root in 0..{n - 1}, got {self.root}")
        elif self.root is not None:
            raise PatternError(f"root: {coll.value} takes no root, got {self.root}")
        if C == 0:
            raise PatternError("chunks: a pattern needs at least one chunk")
        if len(self.chunk_graph) != C:
            raise PatternError(f"chunks: {C} sizes but {len(self.chunk_graph)} graph ids")
        if chunk_ids is not None:
            bad = [i for i, cid in enumerate(chunk_ids) if cid != i]
            if bad:
                raise PatternError(f"chunks[{bad[0]}].id: expected {bad[0]} (ids are 0..C-1 in order), "
                                   f"got {chunk_ids[bad[0]]}")
        bad = np.flatnonzero(~(self.chunk_size > 0) | ~(self.chunk_size <= 1 + SIZE_TOL))
        if bad.size:
            raise PatternError(f"chunks[{bad[0]}].size: must be in (0, 1], got {self.chunk_size[bad[0]]}")
        bad = np.flatnonzero((self.chunk_graph < 0) | (self.chunk_graph > MAX_INDEX))
        if bad.size:
            raise PatternError(f"chunks[{bad[0]}].graph: must be in 0..{MAX_INDEX}, got {self.chunk_graph[bad[0]]}")
        total = float(self.chunk_size.sum())
        if abs(total - 1.0) > 1e-6:
            raise PatternError(f"chunks: sizes must sum to 1 (the whole message), they sum to {total:.9g}")
        if coll.is_blocked:
            self._check_blocks()
        for name, arr in (("step", self.step), ("src", self.src), ("dst", self.dst), ("op", self.op)):
            if len(arr) != F:
                raise PatternError(f"flows: {F} steps but {len(arr)} {name} entries")
        if len(self.chunk_ptr) != F + 1 or (F and (self.chunk_ptr[0] != 0 or self.chunk_ptr[-1] != len(self.chunk_idx))):
            raise PatternError("flows: chunk_ptr is not a CSR offset array for the flows' chunks")
        if F == 0:
            return
        self._check_ranks()
        bad = np.flatnonzero(self.step < 0)
        if bad.size:
            raise PatternError(f"flows[{bad[0]}].step: must be >= 0, got {self.step[bad[0]]}")
        bad = np.flatnonzero(self.step > MAX_INDEX)
        if bad.size:
            raise PatternError(f"flows[{bad[0]}].step: must be <= {MAX_INDEX} (steps are logical times; "
                               f"number them densely), got {self.step[bad[0]]}")
        bad = np.flatnonzero((self.op != 0) & (self.op != 1))
        if bad.size:
            raise PatternError(f"flows[{bad[0]}].op: unknown op code {self.op[bad[0]]}")
        counts = np.diff(self.chunk_ptr)
        bad = np.flatnonzero(counts <= 0)
        if bad.size:
            raise PatternError(f"flows[{bad[0]}].chunks: a flow must carry at least one chunk")
        bad = np.flatnonzero((self.chunk_idx < 0) | (self.chunk_idx >= C))
        if bad.size:
            f = int(np.searchsorted(self.chunk_ptr, bad[0], side="right") - 1)
            raise PatternError(f"flows[{f}].chunks: chunk id {self.chunk_idx[bad[0]]} out of range 0..{C - 1}")
        fid = self.pair_flow
        g = self.chunk_graph[self.chunk_idx]
        first_g = g[self.chunk_ptr[:-1]]
        bad = np.flatnonzero(g != first_g[fid])
        if bad.size:
            f = int(fid[bad[0]])
            raise PatternError(f"flows[{f}].chunks: chunks of different chunk graphs "
                               f"({sorted(set(g[self.chunk_ptr[f]:self.chunk_ptr[f + 1]].tolist()))}) in one flow")
        s = np.sort(fid * C + self.chunk_idx)
        rep = np.flatnonzero(s[1:] == s[:-1])
        if rep.size:
            k = s[rep[0]]
            raise PatternError(f"flows[{k // C}].chunks: chunk {k % C} listed twice")

    def _check_ranks(self) -> None:
        """The structural checks that read ``src``/``dst``: ranks in ``0..N-1``, no self-flow.

        Raises:
            PatternError: naming the first bad flow.
        """
        n = self.num_ranks
        for name, arr in (("src", self.src), ("dst", self.dst)):
            bad = np.flatnonzero((arr < 0) | (arr >= n))
            if bad.size:
                raise PatternError(f"flows[{bad[0]}].{name}: rank {arr[bad[0]]} out of range 0..{n - 1}")
        bad = np.flatnonzero(self.src == self.dst)
        if bad.size:
            raise PatternError(f"flows[{bad[0]}]: self-flow from rank {self.src[bad[0]]} to itself")

    def relabelled(self, src: np.ndarray, dst: np.ndarray, root: int | None = None) -> "CollectivePattern":
        """A copy with new flow endpoints ``src``/``dst`` (shape ``(F,)``) and ``root``, everything
        else shared; checks only what the new fields can break (:meth:`_check_ranks`, the root's
        range), so it equals :meth:`replace` for a pattern that passed its checks — the tuner's
        fast path for scoring many relabellings of one checked pattern.

        Raises:
            PatternError: a rank out of range, a self-flow, a bad root.
        """
        q = CollectivePattern.__new__(CollectivePattern)
        q.collective, q.num_ranks, q.name = self.collective, self.num_ranks, self.name
        q.root = None if root is None else int(root)
        for k in ("chunk_size", "chunk_graph", "step", "op", "chunk_ptr", "chunk_idx"):
            setattr(q, k, getattr(self, k))       # read-only arrays, shared
        for k in _ENDPOINT_FREE:                  # cached properties that do not read src / dst
            if k in self.__dict__:
                q.__dict__[k] = self.__dict__[k]
        q.src, q.dst = _as_int_array(src, "flow src"), _as_int_array(dst, "flow dst")
        q.src.flags.writeable = q.dst.flags.writeable = False
        if q.collective.needs_root and (q.root is None or not 0 <= q.root < q.num_ranks):
            raise PatternError(f"root: {q.collective.value} needs a root in 0..{q.num_ranks - 1}, got {q.root}")
        if q.num_flows and (len(q.src) != q.num_flows or len(q.dst) != q.num_flows):
            raise PatternError(f"flows: {q.num_flows} steps but {len(q.src)} src / {len(q.dst)} dst entries")
        if q.num_flows:
            q._check_ranks()
        return q

    def _check_blocks(self) -> None:
        B = self.collective.num_blocks(self.num_ranks)
        ends = np.cumsum(self.chunk_size) * B
        starts = ends - self.chunk_size * B
        tol = _block_tol(len(self.chunk_size), B)
        blk = np.floor(starts + tol).astype(np.int64)
        bad = np.flatnonzero(ends > blk + 1 + max(1e-6, tol))
        if bad.size:
            c = int(bad[0])
            what = "one rank's block" if B == self.num_ranks else "one (source, destination) block"
            raise PatternError(
                f"chunks[{c}]: for {self.collective.value} every chunk must lie inside {what} "
                f"(block = 1/{B} of the message); chunk {c} spans [{starts[c] / B:.6g}, {ends[c] / B:.6g})")

    @cached_property
    def chunk_block(self) -> np.ndarray:
        """Block of each chunk, shape ``(C,)``: rank ``r``'s block for AllGather/ReduceScatter,
        ``s*N + d`` (data from rank s to rank d) for AllToAll, 0 otherwise
        (:meth:`Collective.num_blocks`; chunks lie in the message in id order)."""
        B = self.collective.num_blocks(self.num_ranks)
        mid = (np.cumsum(self.chunk_size) - self.chunk_size / 2) * B    # a chunk's middle: far from its block's ends
        return np.clip(np.floor(mid).astype(np.int64), 0, B - 1)

    # --------------------------------------------------------------- accessors
    @property
    def num_flows(self) -> int:
        """Number of flows F."""
        return len(self.step)

    @property
    def num_chunks(self) -> int:
        """Number of chunks C."""
        return len(self.chunk_size)

    @property
    def num_steps(self) -> int:
        """1 + the largest step (0 for a pattern with no flows)."""
        return int(self.step.max()) + 1 if self.num_flows else 0

    @property
    def chunks(self) -> list[Chunk]:
        """The chunks as :class:`Chunk` objects."""
        return [Chunk(i, float(s), int(g)) for i, (s, g) in enumerate(zip(self.chunk_size, self.chunk_graph))]

    def flow(self, i: int) -> Flow:
        """Flow ``i`` as a :class:`Flow`."""
        a, b = self.chunk_ptr[i], self.chunk_ptr[i + 1]
        return Flow(int(self.step[i]), int(self.src[i]), int(self.dst[i]),
                    tuple(int(c) for c in self.chunk_idx[a:b]), Op.from_code(self.op[i]))

    @property
    def flows(self) -> list[Flow]:
        """All flows as :class:`Flow` objects (in stored order)."""
        return [self.flow(i) for i in range(self.num_flows)]

    @cached_property
    def pair_flow(self) -> np.ndarray:
        """Flow index of each (flow, chunk) pair, shape ``(len(chunk_idx),)``."""
        return np.repeat(np.arange(self.num_flows, dtype=np.int64), np.diff(self.chunk_ptr))

    @cached_property
    def flow_fraction(self) -> np.ndarray:
        """Fraction of the message each flow carries, shape ``(F,)``."""
        return np.bincount(self.pair_flow, weights=self.chunk_size[self.chunk_idx], minlength=self.num_flows)

    @cached_property
    def flow_graph(self) -> np.ndarray:
        """Chunk-graph id of each flow, shape ``(F,)``."""
        if self.num_flows == 0:
            return np.zeros(0, dtype=np.int64)
        return self.chunk_graph[self.chunk_idx[self.chunk_ptr[:-1]]]

    def flow_bytes(self, message_bytes: float) -> np.ndarray:
        """Bytes each flow carries for a message of ``message_bytes`` (nccl-tests' size S),
        shape ``(F,)``: its fraction x S, times N for AllToAll, whose chunks are fractions of
        all N ranks' buffers (:meth:`Collective.message_scale`)."""
        return self.flow_fraction * (float(message_bytes) * self.collective.message_scale(self.num_ranks))

    def chunk_graphs(self) -> dict[int, np.ndarray]:
        """Chunk ids of each chunk graph: ``{graph id: sorted chunk ids}``."""
        order = np.argsort(self.chunk_graph, kind="stable")
        gids, starts = np.unique(self.chunk_graph[order], return_index=True)
        parts = np.split(order, starts[1:])
        return {int(g): p for g, p in zip(gids, parts)}

    # ----------------------------------------------------------------- degrees
    def degrees(self, per_graph: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """In- and out-degree of every rank at every step (flows counted once each).

        Returns:
            ``(indeg, outdeg)``, each of shape ``(T, N)``, or ``(G, T, N)`` with
            ``per_graph=True`` where G = 1 + the largest chunk-graph id.

        Raises:
            PatternError: the two tables would take more than 1 GiB (steps numbered
                far apart, e.g. near 2^31); the size is named.
        """
        T, N = max(self.num_steps, 1), self.num_ranks
        G = int(self.chunk_graph.max()) + 1 if per_graph else 1
        need = 2 * 8 * G * T * N
        if need > MAX_DEGREE_BYTES:
            raise PatternError(f"degrees: {G} graph(s) x {T} steps x {N} ranks need {need / 2**30:.1f} GiB of "
                               f"tables (limit {MAX_DEGREE_BYTES / 2**30:.0f} GiB); are the steps numbered densely?")
        if per_graph:
            base = self.flow_graph * (T * N) + self.step * N
            size, shape = G * T * N, (G, T, N)
        else:
            base = self.step * N
            size, shape = T * N, (T, N)
        indeg = np.bincount(base + self.dst, minlength=size).reshape(shape)
        outdeg = np.bincount(base + self.src, minlength=size).reshape(shape)
        return indeg, outdeg

    def flow_degree(self) -> np.ndarray:
        """The TEN degree of each flow as REACT §5.2 uses it: max over the flow's
        two endpoints of max(in-degree, out-degree) at the flow's step, shape ``(F,)``."""
        indeg, outdeg = self.degrees()
        deg = np.maximum(indeg, outdeg)
        return np.maximum(deg[self.step, self.src], deg[self.step, self.dst])

    # ------------------------------------------------------------ dependencies
    def dependencies(self) -> tuple[np.ndarray, np.ndarray]:
        """For each flow, the earlier flows into its source that touch one of its chunks.

        A flow of step t may start once all these have delivered (data-driven
        execution). Returns CSR arrays ``(dep_ptr, dep_idx)``: the dependencies
        of flow f are ``dep_idx[dep_ptr[f]:dep_ptr[f+1]]`` (sorted, unique).
        """
        return self._deps

    @cached_property
    def _deps(self) -> tuple[np.ndarray, np.ndarray]:
        # tiered as verify's count is: the numpy reference for a process's first DEPS_COMPILED_AFTER
        # patterns, the compiled lists after (equal arrays, tests/test_pattern_deps.py)
        from .deps import dependencies_csr, dependencies_numpy  # start-up cost: numba
        _deps_calls[0] += 1
        return dependencies_numpy(self) if _deps_calls[0] <= DEPS_COMPILED_AFTER else dependencies_csr(self)

    # -------------------------------------------------------------- relabelling
    def relabel(self, perm: Sequence[int] | np.ndarray, graph: int | None = None,
                flows: np.ndarray | Sequence[int] | None = None) -> "CollectivePattern":
        """A new pattern where rank ``r`` is replaced by ``perm[r]``.

        Args:
            perm: a permutation of ``0..N-1``, shape ``(N,)``.
            graph: relabel only the flows of this chunk graph (REACT transform ②).
            flows: relabel only these flow indices or this boolean mask
                (single TEN positions, transform ③). At most one of ``graph``
                and ``flows`` may be given.

        The root of Broadcast/Reduce moves with a whole-pattern relabel. The
        result is not verified here; callers that change semantics
        (``graph``/``flows``) must :func:`verify` it.

        Raises:
            PatternError: if ``perm`` is not a permutation of ``0..N-1``.
        """
        perm = np.asarray(perm, dtype=np.int64).reshape(-1)
        n = self.num_ranks
        if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
            raise PatternError(f"perm: expected a permutation of 0..{n - 1}, got {perm.tolist()[:16]}")
        if graph is not None and flows is not None:
            raise PatternError("relabel: give graph or flows, not both")
        if graph is None and flows is None:
            mask = None
        elif graph is not None:
            mask = self.flow_graph == int(graph)
            if not mask.any():
                raise PatternError(f"graph: no flow carries chunk graph {graph}")
        else:
            fl = np.asarray(flows)
            mask = fl.astype(bool) if fl.dtype == bool else np.isin(np.arange(self.num_flows), fl)
        if mask is None:
            src, dst = perm[self.src], perm[self.dst]
            root = None if self.root is None else int(perm[self.root])
        else:
            src = np.where(mask, perm[self.src], self.src)
            dst = np.where(mask, perm[self.dst], self.dst)
            root = self.root
        return self.replace(src=src, dst=dst, root=root)

    def replace(self, **arrays) -> "CollectivePattern":
        """A copy with some arrays/fields replaced (``src``, ``dst``, ``step``, ``op``,
        ``root``, ``name``); checked structurally."""
        fields = dict(collective=self.collective, num_ranks=self.num_ranks, chunk_size=self.chunk_size,
                      chunk_graph=self.chunk_graph, step=self.step, src=self.src, dst=self.dst, op=self.op,
                      chunk_ptr=self.chunk_ptr, chunk_idx=self.chunk_idx, root=self.root, name=self.name)
        unknown = set(arrays) - set(fields)
        if unknown:
            raise PatternError(f"replace: unknown fields {sorted(unknown)}")
        fields.update(arrays)
        return CollectivePattern.from_arrays(**fields)

    # ------------------------------------------------------------- equality
    def canonical_key(self) -> tuple:
        """A hashable key equal for patterns with the same flows in any order."""
        F = self.num_flows
        chunks = tuple(tuple(sorted(self.chunk_idx[self.chunk_ptr[i]:self.chunk_ptr[i + 1]].tolist()))
                       for i in range(F))
        rows = sorted(zip(self.step.tolist(), self.src.tolist(), self.dst.tolist(), self.op.tolist(), chunks))
        return (self.collective.value, self.num_ranks, self.root,
                tuple(np.round(self.chunk_size, 12).tolist()), tuple(self.chunk_graph.tolist()), tuple(rows))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CollectivePattern):
            return NotImplemented
        return self.canonical_key() == other.canonical_key()

    def __hash__(self) -> int:
        return hash(self.canonical_key())

    def __repr__(self) -> str:
        root = f", root={self.root}" if self.root is not None else ""
        nm = f"{self.name!r}, " if self.name else ""
        return (f"CollectivePattern({nm}{self.collective.value}, ranks={self.num_ranks}{root}, "
                f"chunks={self.num_chunks}, flows={self.num_flows}, steps={self.num_steps})")

    def show(self, max_steps: int | None = 40) -> str:
        """A compact human-readable listing: one line per step, flows grouped by
        chunk graph as ``src>dst[chunks]`` (``+`` reduce, ``=`` copy).

        Args:
            max_steps: list at most this many steps (the rest as one ``... N more steps``
                line); ``None`` lists every step.

        Raises:
            ValueError: ``max_steps`` is not a positive integer or ``None``.
        """
        if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer))
                                      or max_steps < 1):
            raise ValueError(f"show: max_steps must be a positive integer or None, got {max_steps!r}")
        lines = [repr(self)]
        graphs = self.chunk_graphs()
        lines.append(f"  chunk graphs: {len(graphs)}; chunk sizes: "
                     + _summarise_sizes(self.chunk_size))
        order = np.lexsort((self.src, self.flow_graph, self.step))
        shown = 0
        steps = np.unique(self.step)   # steps with flows only: a step numbered 2^31 costs nothing
        for t in steps.tolist():
            if max_steps is not None and shown >= max_steps:
                lines.append(f"  ... {len(steps) - shown} more steps")
                break
            lo, hi = np.searchsorted(self.step[order], [t, t + 1])
            sel = order[lo:hi]
            parts = []
            for i in sel[:64]:
                cs = self.chunk_idx[self.chunk_ptr[i]:self.chunk_ptr[i + 1]]
                cstr = _compact_ints(cs)
                parts.append(f"{self.src[i]}>{self.dst[i]}{'+' if self.op[i] == 0 else '='}[{cstr}]")
            more = f" ... (+{len(sel) - 64})" if len(sel) > 64 else ""
            lines.append(f"  t{t:<3d} " + " ".join(parts) + more)
            shown += 1
        return "\n".join(lines)


def _compact_ints(values: np.ndarray) -> str:
    vals = sorted(int(v) for v in values)
    out, i = [], 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(str(vals[i]) if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ",".join(out)


def _summarise_sizes(sizes: np.ndarray) -> str:
    u = np.unique(np.round(sizes, 12))
    if len(u) == 1:
        return f"{len(sizes)} x {u[0]:.6g}"
    return f"{len(sizes)} chunks, {u.min():.6g}..{u.max():.6g}"

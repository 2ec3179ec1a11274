"""Steps from data versions: the earliest step numbering that keeps a pattern's meaning.

A pattern's meaning is fixed by *which version* of each (rank, chunk) every flow reads
and writes, not by the step numbers themselves. Version ``v`` of (rank r, chunk c) is the
value after the v-th write into it (0 = the initial value). Given, for every flow and
chunk, the version it reads at its source and the version it writes at its destination,
the constraints on steps are (a flow of step t reads the state at the end of step t-1):

- read after write: a flow reading version v runs after the writer of v: ``s >= s(W_v) + 1``;
- write after read: the writer of version v+1 runs no earlier than a reader of v:
  ``s(W_{v+1}) >= s``;
- write after write: ``s(W_v) >= s(W_{v-1})``, ``+ 1`` unless both are reduces (reduces into
  one (rank, chunk) in one step add up, a copy among them would be ambiguous).

The least solution (a longest path; zero-weight cycles are exchanges in one step) is what
:func:`assign_steps` returns. :func:`normalize_steps` renumbers a pattern that way, so two
patterns that do the same thing in different step numberings compare equal; the MSCCL-XML
importer (:mod:`reactccl.pattern.msccl_import`) uses the same solver to turn an executed
program back into steps.

Source: ours (REACT §5.1 TEN semantics as DESIGN.md states them).
"""

from __future__ import annotations

import numpy as np

from .ir import CollectivePattern
from .types import PatternError

__all__ = ["assign_steps", "pattern_versions", "normalize_steps"]


def assign_steps(num_flows: int, rec_flow, rec_src, rec_dst, rec_chunk, rec_read, rec_write,
                 flow_is_reduce) -> np.ndarray:
    """Least steps satisfying the version constraints (see the module docstring).

    Args:
        num_flows: F.
        rec_flow, rec_src, rec_dst, rec_chunk: one record per (flow, chunk) pair, shape ``(P,)``.
        rec_read: the version of (src, chunk) the flow reads.
        rec_write: the version of (dst, chunk) it writes (>= 1).
        flow_is_reduce: bool per flow, shape ``(F,)``.

    Returns:
        steps, shape ``(F,)``, starting at 0.

    Raises:
        PatternError: a version written twice, or constraints that cannot hold (a cycle
            through a read-after-write edge).
    """
    f = np.asarray(rec_flow, dtype=np.int64)
    src, dst = np.asarray(rec_src, dtype=np.int64), np.asarray(rec_dst, dtype=np.int64)
    ch = np.asarray(rec_chunk, dtype=np.int64)
    rd, wr = np.asarray(rec_read, dtype=np.int64), np.asarray(rec_write, dtype=np.int64)
    red = np.asarray(flow_is_reduce, dtype=bool)
    if num_flows == 0:
        return np.zeros(0, dtype=np.int64)
    writer: dict[tuple[int, int, int], int] = {}
    for i in range(len(f)):
        key = (int(dst[i]), int(ch[i]), int(wr[i]))
        if writer.setdefault(key, int(f[i])) != int(f[i]):
            raise PatternError(f"rank {key[0]}, chunk {key[1]}: version {key[2]} written by flows "
                               f"{writer[key]} and {int(f[i])}")
    eu, ev, ew = [], [], []
    for i in range(len(f)):
        fi = int(f[i])
        w = writer.get((int(src[i]), int(ch[i]), int(rd[i])))
        if w is not None:                                   # read after write
            eu.append(w), ev.append(fi), ew.append(1)
        w = writer.get((int(src[i]), int(ch[i]), int(rd[i]) + 1))
        if w is not None and w != fi:                       # write after read
            eu.append(fi), ev.append(w), ew.append(0)
        w = writer.get((int(dst[i]), int(ch[i]), int(wr[i]) - 1))
        if w is not None:                                   # write after write
            eu.append(w), ev.append(fi), ew.append(0 if (red[w] and red[fi]) else 1)
    steps = np.zeros(num_flows, dtype=np.int64)
    if not eu:
        return steps
    u, v, w = np.asarray(eu), np.asarray(ev), np.asarray(ew)
    for _ in range(num_flows + 1):
        cand = steps[u] + w
        new = steps.copy()
        np.maximum.at(new, v, cand)
        if np.array_equal(new, steps):
            return steps
        steps = new
    bad = int(v[np.flatnonzero(steps[u] + w > steps[v])[0]])
    raise PatternError(f"flow {bad}: its reads and writes cannot be ordered into steps (a flow would have "
                       "to run after itself: a cycle through a read-after-write)")


def pattern_versions(p: CollectivePattern) -> tuple[np.ndarray, ...]:
    """The version records of a pattern: ``(flow, src, dst, chunk, read, write)`` per (flow, chunk)
    pair, shape ``(P,)`` each. Flows of step t read the versions at the end of step t-1; writes
    of one step get new versions in flow order."""
    C = p.num_chunks
    pf = p.pair_flow
    ch = p.chunk_idx
    version = np.zeros(p.num_ranks * C, dtype=np.int64)
    read = np.zeros(len(pf), dtype=np.int64)
    write = np.zeros(len(pf), dtype=np.int64)
    order = np.lexsort((pf, p.step[pf]))
    steps = p.step[pf][order]
    bounds = np.flatnonzero(np.diff(steps)) + 1
    for sel in np.split(order, bounds):
        if not len(sel):
            continue
        f = pf[sel]
        read[sel] = version[p.src[f] * C + ch[sel]]
        tgt = p.dst[f] * C + ch[sel]
        for j, t in zip(sel.tolist(), tgt.tolist()):   # in flow order within the step
            version[t] += 1
            write[j] = version[t]
    return pf, p.src[pf], p.dst[pf], ch, read, write


def normalize_steps(p: CollectivePattern) -> CollectivePattern:
    """``p`` with every flow at the earliest step its reads and writes allow (same meaning)."""
    if p.num_flows == 0:
        return p
    steps = assign_steps(p.num_flows, *pattern_versions(p), p.op == 0)
    return p.replace(step=steps)

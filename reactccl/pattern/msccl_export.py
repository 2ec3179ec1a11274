"""A pattern as an MSCCL-XML program (the format of the MSCCL executor and msccl-tools).

How a pattern becomes a program (format and step types: :mod:`reactccl.pattern.msccl_common`):

- **Chunks to cells.** Chunk c (a fraction of the message) covers whole cells of a buffer of
  ``nchunksperloop`` = K cells, K the LCM of the sizes' denominators; chunks lie in id order.
  Everything runs in place in one buffer per GPU: the input ``i`` (AllReduce, ReduceScatter,
  Broadcast, Reduce) or the output ``o`` (AllGather, whose input is its own block of ``o``).
- **Flows to sends and receives.** A flow's chunks, cut into contiguous runs, are one send step
  at the source and one receive step at the destination each: ``r`` for a copy, ``rrc`` for a
  reduce. A receive whose value is exactly what the rank sends on next is fused with that send:
  ``rcs`` (copy), ``rrcs`` (reduce), or ``rrs`` when the reduced value is only forwarded and then
  overwritten. Fusion is kept only where it keeps every connection's send order.
- **Threadblocks.** One per (send peer, receive peer, channel) on each GPU, the channel being the
  flow's chunk graph. Each peer appears once per channel and direction, as MSCCL needs.
- **Order and dependencies.** Steps run in a threadblock in the pattern's step order (sends
  before receives within a step). Across threadblocks a step waits (``depid``/``deps``, extra ones
  on ``nop`` steps) for the last write of what it reads, for the previous write of what it writes
  (reduces into one chunk in one step are serialised) and for the reads of the value it
  overwrites. Every wait points to an earlier step in that order, so the program cannot deadlock.

Source: MSCCL executor's XML reader (microsoft/msccl), msccl-tools ``ir.py`` (attribute names,
nop-carried dependencies, threadblock order); the lowering is ours.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import numpy as np

from .ir import CollectivePattern
from .msccl_common import COLL_TO_MSCCL, MscclError, chunk_grid
from .types import Collective

__all__ = ["to_msccl_xml", "save_msccl_xml", "executor_limits", "MAX_CHANNELS"]

#: NCCL's MAXCHANNELS: chunk graphs beyond it share channels (graph g on channel g % 32).
MAX_CHANNELS = 32


class _Op:
    __slots__ = ("rank", "type", "off", "cnt", "recv", "send", "pos", "tb", "deps", "hasdep", "index")

    def __init__(self, rank: int, type_: str, off: int, cnt: int, recv: int | None, send: int | None, pos):
        self.rank, self.type, self.off, self.cnt = rank, type_, off, cnt
        self.recv, self.send, self.pos = recv, send, pos
        self.tb = None
        self.deps: set[int] = set()
        self.hasdep = False
        self.index = -1


def _units(p: CollectivePattern):
    """Flows cut into runs of consecutive chunk ids: (flow, first chunk, chunk count) each."""
    out = []
    for f in range(p.num_flows):
        cs = np.sort(p.chunk_idx[p.chunk_ptr[f]:p.chunk_ptr[f + 1]])
        start = 0
        for i in range(1, len(cs) + 1):
            if i == len(cs) or cs[i] != cs[i - 1] + 1:
                out.append((f, int(cs[start]), i - start))
                start = i
    return out


def to_msccl_xml(pattern: CollectivePattern, name: str | None = None, proto: str = "Simple",
                 max_channels: int = MAX_CHANNELS) -> str:
    """The MSCCL-XML program that runs ``pattern`` (see the module docstring).

    Args:
        pattern: any structurally valid pattern (verify it first: the program does what it does).
        name: the ``<algo name>`` (default the pattern's name).
        proto: ``Simple``, ``LL`` or ``LL128`` (written as given).
        max_channels: chunk graph g runs on channel ``g % max_channels``.

    Returns:
        The XML text (pretty-printed, UTF-8 declaration-free, as msccl-tools writes it).

    Raises:
        MscclError: chunk sizes that fit no grid of at most 65536 cells.
    """
    p = pattern
    n = p.num_ranks
    K, cell_off, cell_cnt = chunk_grid(p.chunk_size, n, p.collective.is_blocked)
    units = _units(p)
    U = len(units)
    u_flow = np.array([u[0] for u in units], dtype=np.int64)
    u_c0 = np.array([u[1] for u in units], dtype=np.int64)
    u_nc = np.array([u[2] for u in units], dtype=np.int64)
    u_step = p.step[u_flow] if U else np.zeros(0, dtype=np.int64)
    u_src, u_dst = (p.src[u_flow], p.dst[u_flow]) if U else (u_step, u_step)
    u_red = (p.op[u_flow] == 0) if U else np.zeros(0, dtype=bool)
    u_chan = (p.flow_graph[u_flow] % max_channels) if U else u_step
    # per (rank, chunk): accesses in the pattern's order (step, reads before writes, flow, unit)
    seq: dict[tuple[int, int], list] = defaultdict(list)
    for u in range(U):
        s, f = int(u_step[u]), int(u_flow[u])
        for c in range(int(u_c0[u]), int(u_c0[u] + u_nc[u])):
            seq[(int(u_src[u]), c)].append((s, 0, f, u))
            seq[(int(u_dst[u]), c)].append((s, 1, f, u))
    last_w = {}      # (u, c) -> unit whose write u's read sees (or -1)
    prev_w = {}      # (u, c) -> previous writer unit of u's write (or -1)
    since_r = {}     # (u, c) -> reader units of the value u's write overwrites
    readers = {}     # (u, c) -> reader units of the value u writes
    next_w = {}      # (u, c) -> next writer unit after u's write (or -1)
    for (r, c), ev in seq.items():
        ev.sort()
        w, rs = -1, []
        writes = []
        for _s, phase, _f, u in ev:
            if phase == 0:
                last_w[(u, c)] = w
                rs.append(u)
                if w >= 0:
                    readers[(w, c)].append(u)
            else:
                prev_w[(u, c)], since_r[(u, c)] = w, rs
                readers[(u, c)] = []
                writes.append(u)
                w, rs = u, []
        for a, b in zip(writes, writes[1:] + [-1]):
            next_w[(a, c)] = b

    def chunks(u):
        return range(int(u_c0[u]), int(u_c0[u] + u_nc[u]))

    # connections: (src, dst, chan) -> send units with [position key, send key]
    def send_key(u):
        return (int(u_step[u]), 0, int(u_flow[u]), int(u_c0[u]))

    def recv_key(u):
        return (int(u_step[u]), 1, int(u_flow[u]), int(u_c0[u]))

    conn: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for u in range(U):
        conn[(int(u_src[u]), int(u_dst[u]), int(u_chan[u]))].append(u)
    for lst in conn.values():
        lst.sort(key=send_key)
    send_pos = {u: send_key(u) for u in range(U)}
    fused_with: dict[int, int] = {}      # send unit -> recv unit
    recv_used: set[int] = set()
    recv_bind: dict[tuple[int, int, int], int] = {}   # (rank, chan, recv peer) -> send peer
    send_bind: dict[tuple[int, int, int], int] = {}   # (rank, chan, send peer) -> recv peer
    for u2 in sorted(range(U), key=send_key):
        a, g = int(u_src[u2]), int(u_chan[u2])
        ws = {last_w.get((u2, c), -1) for c in chunks(u2)}
        if len(ws) != 1:
            continue
        u1 = ws.pop()
        if (u1 < 0 or u1 in recv_used or int(u_chan[u1]) != g or u_c0[u1] != u_c0[u2]
                or u_nc[u1] != u_nc[u2]):
            continue
        x, y = int(u_src[u1]), int(u_dst[u2])
        if recv_bind.get((a, g, x), y) != y or send_bind.get((a, g, y), x) != x:
            continue
        lst = conn[(a, y, g)]
        old = send_pos[u2]
        send_pos[u2] = recv_key(u1)
        pos = [send_pos[v] for v in lst]
        if any(pos[i] >= pos[i + 1] for i in range(len(pos) - 1)):
            send_pos[u2] = old
            continue
        fused_with[u2] = u1
        recv_used.add(u1)
        recv_bind[(a, g, x)] = y
        send_bind[(a, g, y)] = x

    ops: list[_Op] = []
    recv_op: dict[int, int] = {}
    send_op: dict[int, int] = {}
    fused_recv = {u1: u2 for u2, u1 in fused_with.items()}
    for u in range(U):
        off, cnt = int(cell_off[u_c0[u]]), int(cell_cnt[u_c0[u]:u_c0[u] + u_nc[u]].sum())
        if u in fused_recv:
            u2 = fused_recv[u]
            if not u_red[u]:
                t = "rcs"
            else:
                only_fwd = all(readers[(u, c)] == [u2] and next_w[(u, c)] >= 0 and not u_red[next_w[(u, c)]]
                               for c in chunks(u))
                t = "rrs" if only_fwd else "rrcs"
            recv_op[u] = send_op[u2] = len(ops)
            ops.append(_Op(int(u_dst[u]), t, off, cnt, u, u2, recv_key(u)))
        else:
            recv_op[u] = len(ops)
            ops.append(_Op(int(u_dst[u]), "rrc" if u_red[u] else "r", off, cnt, u, None, recv_key(u)))
        if u not in fused_with:
            send_op[u] = len(ops)
            ops.append(_Op(int(u_src[u]), "s", off, cnt, None, u, send_key(u)))
    # threadblocks: (send peer, recv peer, chan) per rank
    for op in ops:
        g = int(u_chan[op.send if op.send is not None else op.recv])
        if op.recv is not None and op.send is not None:
            x, y = int(u_src[op.recv]), int(u_dst[op.send])
        elif op.recv is not None:
            x = int(u_src[op.recv])
            y = recv_bind.get((op.rank, g, x), -1)
        else:
            y = int(u_dst[op.send])
            x = send_bind.get((op.rank, g, y), -1)
        op.tb = (y, x, g)
    # dependencies
    for i, op in enumerate(ops):
        if op.recv is not None:
            for c in chunks(op.recv):
                w = prev_w[(op.recv, c)]
                if w >= 0:
                    op.deps.add(recv_op[w])
                op.deps.update(send_op[v] for v in since_r[(op.recv, c)])
        if op.send is not None:
            for c in chunks(op.send):
                w = last_w[(op.send, c)]
                if w >= 0:
                    op.deps.add(recv_op[w])
        op.deps.discard(i)
    return _write(p, ops, K, name, proto)


def _write(p: CollectivePattern, ops: list[_Op], K: int, name: str | None, proto: str) -> str:
    n = p.num_ranks
    by_rank: dict[int, dict[tuple, list[int]]] = defaultdict(lambda: defaultdict(list))
    for i, op in enumerate(ops):
        by_rank[op.rank][op.tb].append(i)
    where: dict[int, tuple[int, int]] = {}          # op -> (tb id, position among the tb's ops)
    tb_of: dict[tuple[int, int], list[int]] = {}    # (rank, tb id) -> ops in order
    keys: dict[tuple[int, int], tuple] = {}
    for r, tbs in by_rank.items():
        for tid, key in enumerate(sorted(tbs)):      # msccl-tools' order: send peer, recv peer, channel
            lst = sorted(tbs[key], key=lambda i: ops[i].pos)
            tb_of[(r, tid)], keys[(r, tid)] = lst, key
            for pos, i in enumerate(lst):
                where[i] = (tid, pos)
    for (r, tid), lst in tb_of.items():
        seen: dict[int, int] = {}                    # other tb -> latest position already waited for
        for i in lst:
            need: dict[int, int] = {}
            for d in ops[i].deps:
                if ops[d].pos >= ops[i].pos:         # pragma: no cover - the order argument above
                    raise MscclError(f"internal: a step of rank {r} would wait for a later one")
                dt, dp = where[d]
                if dt != tid:
                    need[dt] = max(need.get(dt, -1), dp)
            ops[i].deps = {dt: dp for dt, dp in sorted(need.items()) if seen.get(dt, -1) < dp}
            for dt, dp in need.items():
                seen[dt] = max(seen.get(dt, -1), dp)
    index: dict[tuple[int, int, int], int] = {}     # (rank, tb id, position) -> step index with nops
    for (r, tid), lst in tb_of.items():
        s = 0
        for pos, i in enumerate(lst):
            s += max(len(ops[i].deps) - 1, 0)
            index[(r, tid, pos)] = s
            s += 1
    waited = {(r, dt, index[(r, dt, dp)]) for (r, tid), lst in tb_of.items() for i in lst
              for dt, dp in ops[i].deps.items()}
    coll = p.collective
    buf = "o" if coll is Collective.ALLGATHER else "i"
    nch = 1 + max((key[2] for key in keys.values()), default=0)
    algo = ET.Element("algo", {
        "name": name if name is not None else (p.name or "reactccl"), "proto": proto, "nchannels": str(nch),
        "nchunksperloop": str(K), "ngpus": str(n), "coll": COLL_TO_MSCCL[coll], "inplace": "1",
        "outofplace": "0", "minBytes": "0", "maxBytes": str(1 << 40), "redop": "sum"})
    if p.root is not None:
        algo.set("root", str(p.root))    # not read by the executor; our importer uses it
    blk = K // n
    ichunks = blk if coll is Collective.ALLGATHER else K
    ochunks = blk if coll is Collective.REDUCESCATTER else K
    for r in range(n):
        gpu = ET.SubElement(algo, "gpu", {"id": str(r), "i_chunks": str(ichunks), "o_chunks": str(ochunks),
                                          "s_chunks": "0"})
        tid = 0
        while (r, tid) in tb_of:
            key = keys[(r, tid)]
            tb = ET.SubElement(gpu, "tb", {"id": str(tid), "send": str(key[0]), "recv": str(key[1]),
                                           "chan": str(key[2])})
            s = 0
            for i in tb_of[(r, tid)]:
                op = ops[i]
                deps = [(dt, index[(r, dt, dp)]) for dt, dp in op.deps.items()]
                items = [("nop", -1, 0, d) for d in deps[:-1]] + [(op.type, op.off, op.cnt, deps[-1] if deps else None)]
                for typ, off, cnt, dep in items:
                    ET.SubElement(tb, "step", {
                        "s": str(s), "type": typ, "srcbuf": buf, "srcoff": str(off), "dstbuf": buf,
                        "dstoff": str(off), "cnt": str(cnt), "depid": str(dep[0]) if dep else "-1",
                        "deps": str(dep[1]) if dep else "-1", "hasdep": "1" if (r, tid, s) in waited else "0"})
                    s += 1
            tid += 1
    ET.indent(algo, space="  ")
    return ET.tostring(algo, encoding="unicode") + "\n"


#: The MSCCL executor's compile-time limits (microsoft/msccl ``msccl_struct.h``).
MSCCL_MAX_NUM_STEPS = 256
MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL = 32
MSCCL_MAX_COUNT = 72


def executor_limits(xml: str) -> list[str]:
    """What in an exported program exceeds the MSCCL executor's limits (steps per threadblock,
    threadblocks per channel on a GPU, cells per step), one sentence each; empty when it fits."""
    root = ET.fromstring(xml)      # our own output: no untrusted input here
    out = []
    worst_steps, worst_tbs, worst_cnt = (0, None), (0, None), (0, None)
    for g in root:
        per_chan: dict[str, int] = defaultdict(int)
        for tb in g:
            per_chan[tb.get("chan")] += 1
            if len(tb) > worst_steps[0]:
                worst_steps = (len(tb), f"gpu {g.get('id')} tb {tb.get('id')}")
            for st in tb:
                c = int(st.get("cnt"))
                if c > worst_cnt[0]:
                    worst_cnt = (c, f"gpu {g.get('id')} tb {tb.get('id')} step {st.get('s')}")
        for chan, k in per_chan.items():
            if k > worst_tbs[0]:
                worst_tbs = (k, f"gpu {g.get('id')} channel {chan}")
    if worst_steps[0] > MSCCL_MAX_NUM_STEPS:
        out.append(f"{worst_steps[1]} has {worst_steps[0]} steps; the MSCCL executor allows {MSCCL_MAX_NUM_STEPS} "
                   "per threadblock (MSCCL_MAX_NUM_STEPS)")
    if worst_tbs[0] > MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL:
        out.append(f"{worst_tbs[1]} has {worst_tbs[0]} threadblocks; the MSCCL executor allows "
                   f"{MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL} (MSCCL_MAX_NUM_THREAD_BLOCKS_PER_CHANNEL); raise "
                   "--max-channels to spread them")
    if worst_cnt[0] >= MSCCL_MAX_COUNT:
        out.append(f"{worst_cnt[1]} moves {worst_cnt[0]} cells; the MSCCL executor needs cnt < {MSCCL_MAX_COUNT} "
                   "(MSCCL_MAX_COUNT)")
    return out


def save_msccl_xml(pattern: CollectivePattern, path: str | Path, **kwargs) -> None:
    """Write :func:`to_msccl_xml` of ``pattern`` to ``path``."""
    Path(path).write_text(to_msccl_xml(pattern, **kwargs))

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
        MscclError: chunk sizes that fit no grid of at most 65536 cells; ``max_channels`` < 1; an AllToAll
            (not exported yet).
    """
    if isinstance(max_channels, bool) or not isinstance(max_channels, (int, np.integer)) or max_channels < 1:
        raise MscclError(f"max_channels: expected an integer >= 1, got {max_channels!r}")
    p = pattern
    if p.collective not in COLL_TO_MSCCL:
        raise MscclError(f"{p.collective.value}: no MSCCL XML export yet (msccl-tools' alltoall keeps a rank's "
                         f"input and output in separate buffers and relays in scratch; this exporter maps the IR's "
                         f"positions to one buffer); save the pattern as JSON instead")
    K, cell_off, cell_cnt = chunk_grid(p.chunk_size, p.num_ranks, p.collective.is_blocked)
    u = _Units(p, max_channels)
    fused, recv_bind, send_bind = _fuse(u)
    ops = _lower(u, fused, recv_bind, send_bind, cell_off, cell_cnt)
    return _write(p, ops, K, name, proto)


class _Units:
    """A pattern's flows cut into units (runs of consecutive chunks, one send step each), with
    every (rank, chunk)'s accesses in the pattern's order: a step's reads, then its writes by flow."""

    def __init__(self, p: CollectivePattern, max_channels: int) -> None:
        units = _units(p)
        self.n = len(units)
        self.flow = np.array([x[0] for x in units], dtype=np.int64)
        self.c0 = np.array([x[1] for x in units], dtype=np.int64)
        self.nc = np.array([x[2] for x in units], dtype=np.int64)
        self.step, self.src, self.dst = p.step[self.flow], p.src[self.flow], p.dst[self.flow]
        self.red = p.op[self.flow] == 0
        self.chan = p.flow_graph[self.flow] % max_channels if self.n else self.step
        self.last_w: dict = {}     # (u, c) -> unit whose write u's read sees (or -1)
        self.prev_w: dict = {}     # (u, c) -> previous writer of what u writes (or -1)
        self.since_r: dict = {}    # (u, c) -> readers of the value u's write overwrites
        self.readers: dict = {}    # (u, c) -> readers of the value u writes
        self.next_w: dict = {}     # (u, c) -> next writer after u (or -1)
        seq: dict[tuple[int, int], list] = defaultdict(list)
        for x in range(self.n):
            t, f = int(self.step[x]), int(self.flow[x])
            for c in self.chunks(x):
                seq[(int(self.src[x]), c)].append((t, 0, f, x))
                seq[(int(self.dst[x]), c)].append((t, 1, f, x))
        for (_r, c), ev in seq.items():
            ev.sort()
            w, rs, writes = -1, [], []
            for _t, phase, _f, x in ev:
                if phase == 0:
                    self.last_w[(x, c)] = w
                    rs.append(x)
                    if w >= 0:
                        self.readers[(w, c)].append(x)
                else:
                    self.prev_w[(x, c)], self.since_r[(x, c)] = w, rs
                    self.readers[(x, c)] = []
                    writes.append(x)
                    w, rs = x, []
            for a, b in zip(writes, writes[1:] + [-1]):
                self.next_w[(a, c)] = b

    def chunks(self, x: int) -> range:
        return range(int(self.c0[x]), int(self.c0[x] + self.nc[x]))

    def send_key(self, x: int) -> tuple:
        """Where a plain send sits in its threadblock: (step, sends first, flow, chunk)."""
        return (int(self.step[x]), 0, int(self.flow[x]), int(self.c0[x]))

    def recv_key(self, x: int) -> tuple:
        return (int(self.step[x]), 1, int(self.flow[x]), int(self.c0[x]))


def _fuse(u: _Units):
    """Receive-then-forward pairs: a send whose every chunk was last written by one receive of the
    same run and channel, where the peers can share a threadblock and moving the send up to the
    receive keeps the connection's order. Returns ``(send unit -> recv unit, recv_bind, send_bind)``
    with the peer bindings ``(rank, chan, recv peer) -> send peer`` and the reverse."""
    conn: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for x in range(u.n):
        conn[(int(u.src[x]), int(u.dst[x]), int(u.chan[x]))].append(x)
    for lst in conn.values():
        lst.sort(key=u.send_key)
    pos = {x: u.send_key(x) for x in range(u.n)}
    fused: dict[int, int] = {}
    used: set[int] = set()
    recv_bind: dict[tuple[int, int, int], int] = {}
    send_bind: dict[tuple[int, int, int], int] = {}
    for u2 in sorted(range(u.n), key=u.send_key):
        a, g = int(u.src[u2]), int(u.chan[u2])
        ws = {u.last_w.get((u2, c), -1) for c in u.chunks(u2)}
        if len(ws) != 1:
            continue
        u1 = ws.pop()
        if u1 < 0 or u1 in used or int(u.chan[u1]) != g or u.c0[u1] != u.c0[u2] or u.nc[u1] != u.nc[u2]:
            continue
        x, y = int(u.src[u1]), int(u.dst[u2])
        if recv_bind.get((a, g, x), y) != y or send_bind.get((a, g, y), x) != x:
            continue
        old, pos[u2] = pos[u2], u.recv_key(u1)
        order = [pos[v] for v in conn[(a, y, g)]]
        if any(order[i] >= order[i + 1] for i in range(len(order) - 1)):
            pos[u2] = old
            continue
        fused[u2] = u1
        used.add(u1)
        recv_bind[(a, g, x)] = y
        send_bind[(a, g, y)] = x
    return fused, recv_bind, send_bind


def _lower(u: _Units, fused, recv_bind, send_bind, cell_off, cell_cnt) -> list[_Op]:
    """The steps (ops) with their types, threadblocks and the ops each waits for."""
    ops: list[_Op] = []
    recv_op: dict[int, int] = {}
    send_op: dict[int, int] = {}
    fused_recv = {u1: u2 for u2, u1 in fused.items()}
    for x in range(u.n):
        off, cnt = int(cell_off[u.c0[x]]), int(cell_cnt[u.c0[x]:u.c0[x] + u.nc[x]].sum())
        if x in fused_recv:
            u2 = fused_recv[x]
            if not u.red[x]:
                t = "rcs"
            else:       # rrs: the sum is only forwarded, then overwritten by a copy
                only_fwd = all(u.readers[(x, c)] == [u2] and u.next_w[(x, c)] >= 0 and not u.red[u.next_w[(x, c)]]
                               for c in u.chunks(x))
                t = "rrs" if only_fwd else "rrcs"
            recv_op[x] = send_op[u2] = len(ops)
            ops.append(_Op(int(u.dst[x]), t, off, cnt, x, u2, u.recv_key(x)))
        else:
            recv_op[x] = len(ops)
            ops.append(_Op(int(u.dst[x]), "rrc" if u.red[x] else "r", off, cnt, x, None, u.recv_key(x)))
        if x not in fused:
            send_op[x] = len(ops)
            ops.append(_Op(int(u.src[x]), "s", off, cnt, None, x, u.send_key(x)))
    for op in ops:      # threadblock (send peer, recv peer, channel)
        g = int(u.chan[op.send if op.send is not None else op.recv])
        if op.recv is not None and op.send is not None:
            x, y = int(u.src[op.recv]), int(u.dst[op.send])
        elif op.recv is not None:
            x = int(u.src[op.recv])
            y = recv_bind.get((op.rank, g, x), -1)
        else:
            y = int(u.dst[op.send])
            x = send_bind.get((op.rank, g, y), -1)
        op.tb = (y, x, g)
    for i, op in enumerate(ops):    # waits: write after write/read, read after write
        if op.recv is not None:
            for c in u.chunks(op.recv):
                w = u.prev_w[(op.recv, c)]
                if w >= 0:
                    op.deps.add(recv_op[w])
                op.deps.update(send_op[v] for v in u.since_r[(op.recv, c)])
        if op.send is not None:
            for c in u.chunks(op.send):
                w = u.last_w[(op.send, c)]
                if w >= 0:
                    op.deps.add(recv_op[w])
        op.deps.discard(i)
    return ops


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

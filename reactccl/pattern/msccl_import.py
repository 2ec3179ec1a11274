"""An MSCCL-XML program read back as a verified pattern.

The program is *executed symbolically*, as the MSCCL executor would run it (format and step
semantics: :mod:`reactccl.pattern.msccl_common`):

1. **Parse safely** with defusedxml (no DTDs, no entity expansion) and check every attribute
   (GPU, threadblock and step named in each error).
2. **Order.** A step follows the previous step of its threadblock, its ``depid``/``deps`` step,
   and, for a receive, the matching send (the k-th send on a connection meets the k-th receive).
   A program whose steps cannot all run reports the first stuck step (a deadlock).
3. **Races.** Vector clocks over threadblocks check that every two accesses to one buffer cell,
   one of them a write, are ordered by that relation; otherwise the result would depend on
   timing and the program is refused.
4. **Values.** Every cell holds the message chunk it belongs to and, per rank, how many times
   that rank's contribution is in it; the final buffers must hold the collective (exactly once).
5. **Flows.** Each rank's own value of each chunk may sit in any buffer. Reducing a value that
   came from rank x into the rank's own value is a reduce flow x -> rank; sending on (or ending
   with) a value that came from x makes it the rank's own: a copy flow x -> rank. So scratch
   buffers, local copies and relays through scratch all become flows. Steps come from the
   versions each flow reads and writes (:func:`reactccl.pattern.steps.assign_steps`); chunks
   are the cells, merged where they always travel together; chunk graphs are channels.
   The pattern is then verified like any other.

Source: MSCCL executor's XML reader and step semantics (microsoft/msccl); ours otherwise.
"""

from __future__ import annotations

from collections import defaultdict, deque
from pathlib import Path

import numpy as np

from .canon import merge_chunks, merge_flows
from .io import read_bounded
from .ir import CollectivePattern
from .msccl_bounds import check_import_size, check_race_work, xml_int
from .msccl_common import MSCCL_TO_COLL, RECVS, REDUCES, SENDS, STEP_TYPES, MscclError, MscclVerificationError
from .steps import assign_steps
from .types import Collective, excerpt
from .verify import verify

__all__ = ["from_msccl_xml", "load_msccl_xml", "is_msccl_xml"]

_SRC_TYPES = frozenset({"s", "rrc", "rrs", "rrcs", "cpy", "re"})
_DST_TYPES = frozenset({"r", "rcs", "rrc", "rrcs", "cpy", "re"})


def is_msccl_xml(text: str) -> bool:
    """True when ``text`` looks like an XML document (first non-blank character ``<``)."""
    return text.lstrip()[:1] == "<"


_int = xml_int   # strict: ASCII digits only, range-checked, the attribute named


def _parse(text: str):
    try:
        from defusedxml import ElementTree as DET
        from defusedxml import DefusedXmlException
    except ImportError as e:  # pragma: no cover - a hard dependency
        raise MscclError("reading MSCCL XML needs defusedxml (pip install defusedxml)") from e
    try:
        return DET.fromstring(text)
    except DefusedXmlException as e:
        raise MscclError(f"refused unsafe XML ({type(e).__name__}: DTDs and entities are not allowed)") from None
    except Exception as e:  # xml.etree.ElementTree.ParseError
        raise MscclError(f"not well-formed XML: {e}") from None


class _Step:
    __slots__ = ("gpu", "tb", "s", "type", "sbuf", "soff", "dbuf", "doff", "cnt", "dep", "node")

    def where(self) -> str:
        return f"gpu {self.gpu}, tb {self.tb}, step {self.s} ({self.type})"


def _read_program(root):
    if root.tag != "algo":
        raise MscclError(f"root element is <{excerpt(root.tag, quote=False)}>, expected <algo>")
    n = _int(root, "ngpus", "algo", lo=1)
    K = _int(root, "nchunksperloop", "algo", lo=1)
    coll_name = root.get("coll")
    if coll_name not in MSCCL_TO_COLL:
        raise MscclError(f"algo: coll={excerpt(coll_name)} has no reactccl collective "
                         f"(known: {', '.join(MSCCL_TO_COLL)})")
    coll = MSCCL_TO_COLL[coll_name]
    inplace = _int(root, "inplace", "algo", default=1, lo=0, hi=1) == 1
    if coll.is_blocked and K % n:
        raise MscclError(f"algo: nchunksperloop {K} is not a multiple of ngpus {n} ({coll_name} needs whole blocks)")
    check_import_size(n, K, coll)     # before any loop over gpus or chunks
    gpus: dict[int, dict] = {}
    for g in root:
        if g.tag != "gpu":
            raise MscclError(f"algo: unexpected element <{excerpt(g.tag, quote=False)}> (expected <gpu>)")
        gid = _int(g, "id", "gpu", lo=0)
        w = f"gpu {gid}"
        if not 0 <= gid < n or gid in gpus:
            raise MscclError(f"{w}: id out of range 0..{n - 1} or repeated")
        sizes = {b: _int(g, a, w, default=0, lo=0)
                 for b, a in (("i", "i_chunks"), ("o", "o_chunks"), ("s", "s_chunks"))}
        tbs: dict[int, tuple] = {}
        for tb in g:
            if tb.tag != "tb":
                raise MscclError(f"{w}: unexpected element <{excerpt(tb.tag, quote=False)}> (expected <tb>)")
            tid = _int(tb, "id", w + ", tb", lo=0)
            wt = f"{w}, tb {tid}"
            if tid in tbs:
                raise MscclError(f"{wt}: id repeated")
            send, recv, chan = _int(tb, "send", wt), _int(tb, "recv", wt), _int(tb, "chan", wt, default=0, lo=0)
            for what, peer in (("send", send), ("recv", recv)):
                if peer == gid or not -1 <= peer < n:
                    raise MscclError(f"{wt}: {what} peer {peer} must be -1 or another gpu in 0..{n - 1}")
            steps = []
            for i, st in enumerate(tb):
                if st.tag != "step":
                    raise MscclError(f"{wt}: unexpected element <{excerpt(st.tag, quote=False)}> (expected <step>)")
                x = _Step()
                x.gpu, x.tb = gid, tid
                x.s = _int(st, "s", f"{wt}, step #{i}", lo=0)
                ws = f"{wt}, step {x.s}"
                if x.s != i:
                    raise MscclError(f"{ws}: steps must be numbered 0, 1, ... in order (expected {i})")
                x.type = st.get("type")
                if x.type not in STEP_TYPES:
                    raise MscclError(f"{ws}: unknown type {excerpt(x.type)} (known: {', '.join(STEP_TYPES)})")
                x.cnt = _int(st, "cnt", ws, default=1, lo=0)
                x.sbuf, x.dbuf = st.get("srcbuf", "i"), st.get("dstbuf", "o")
                x.soff, x.doff = _int(st, "srcoff", ws, default=-1), _int(st, "dstoff", ws, default=-1)
                depid, deps = _int(st, "depid", ws, default=-1), _int(st, "deps", ws, default=-1)
                x.dep = (depid, deps) if depid >= 0 else None
                if x.type != "nop":
                    if x.cnt < 1:
                        raise MscclError(f"{ws}: cnt {x.cnt} must be >= 1")
                    for use, buf, off, types in (("src", x.sbuf, x.soff, _SRC_TYPES), ("dst", x.dbuf, x.doff, _DST_TYPES)):
                        if x.type not in types:
                            continue
                        if buf not in sizes:
                            raise MscclError(f"{ws}: {use}buf {excerpt(buf)} is not i, o or s")
                        if not 0 <= off <= sizes[buf] - x.cnt:
                            raise MscclError(f"{ws}: {use} cells {buf}[{off}:{off + x.cnt}] outside the "
                                             f"{sizes[buf]} cells of buffer {buf}")
                if x.type in SENDS and send < 0:
                    raise MscclError(f"{ws}: a send in a threadblock without a send peer")
                if x.type in RECVS and recv < 0:
                    raise MscclError(f"{ws}: a receive in a threadblock without a recv peer")
                steps.append(x)
            tbs[tid] = (send, recv, chan, steps)
        gpus[gid] = {"sizes": sizes, "tbs": tbs}
    for gid in range(n):
        gpus.setdefault(gid, {"sizes": {"i": 0, "o": 0, "s": 0}, "tbs": {}})
    root_rank = root.get("root")
    return coll, n, K, inplace, gpus, (None if root_rank is None else _int(root, "root", "algo", lo=0))


def _check_program_size(n, K, coll, gpus) -> None:
    """:func:`check_import_size` with the program's counts, before the symbolic run: its steps,
    the cells they move, its vector clocks, and the race check's work (every GPU with steps
    runs a pass over all steps, see :func:`_happens_before`)."""
    per_gpu = [(len(g["tbs"]), sum(len(t[3]) for t in g["tbs"].values())) for g in gpus.values()]
    S = sum(s for _, s in per_gpu)
    moved = sum(x.cnt for g in gpus.values() for t in g["tbs"].values() for x in t[3] if x.type != "nop")
    busy = [t for t, s in per_gpu if s]
    check_import_size(n, K, coll, steps=S, moved=moved, clock_peak=S * max(busy, default=0),
                      clock_kept=sum(t * s for t, s in per_gpu))


def _order(n, gpus):
    """Steps in an order the executor could run them, with vector clocks; the receive/send matching."""
    steps: list[_Step] = []
    tb_index: dict[tuple[int, int], int] = {}
    for gid in range(n):
        for tid, (send, recv, chan, lst) in sorted(gpus[gid]["tbs"].items()):
            tb_index[(gid, tid)] = len(tb_index)
            for x in lst:
                x.node = len(steps)
                steps.append(x)
    S, T = len(steps), len(tb_index)
    preds: list[list[int]] = [[] for _ in range(S)]
    out_conn, in_conn = {}, {}
    for gid in range(n):
        for tid, (send, recv, chan, lst) in gpus[gid]["tbs"].items():
            for peer, table, what in ((send, out_conn, "send to"), (recv, in_conn, "receive from")):
                if peer < 0:
                    continue
                key = (gid, peer, chan)
                if key in table:
                    raise MscclError(f"gpu {gid}: threadblocks {table[key]} and {tid} both {what} gpu {peer} on "
                                     f"channel {chan}; a connection belongs to one threadblock")
                table[key] = tid
            for i, x in enumerate(lst):
                if i:
                    preds[x.node].append(lst[i - 1].node)
                if x.dep is not None:
                    dt, ds = x.dep
                    if dt not in gpus[gid]["tbs"] or not 0 <= ds < len(gpus[gid]["tbs"][dt][3]):
                        raise MscclError(f"{x.where()}: depends on tb {dt} step {ds}, which does not exist")
                    preds[x.node].append(gpus[gid]["tbs"][dt][3][ds].node)
    match: dict[int, int] = {}      # receiving step node -> sending step node
    for (a, y, chan), tid in out_conn.items():
        sends = [x for x in gpus[a]["tbs"][tid][3] if x.type in SENDS]
        rtid = in_conn.get((y, a, chan))
        recvs = [] if rtid is None else [x for x in gpus[y]["tbs"][rtid][3] if x.type in RECVS]
        if len(sends) != len(recvs):
            raise MscclVerificationError(f"gpu {a} sends {len(sends)} times to gpu {y} on channel {chan} but gpu {y} "
                                         f"receives {len(recvs)} times from it (the k-th send meets the k-th receive)")
        for s, r in zip(sends, recvs):
            if s.cnt != r.cnt:
                raise MscclVerificationError(f"{s.where()} sends {s.cnt} cells but the matching {r.where()} "
                                             f"receives {r.cnt}")
            match[r.node] = s.node
            preds[r.node].append(s.node)
    for (y, a, chan), rtid in in_conn.items():
        if (a, y, chan) not in out_conn and any(x.type in RECVS for x in gpus[y]["tbs"][rtid][3]):
            raise MscclVerificationError(f"gpu {y}, tb {rtid} receives from gpu {a} on channel {chan}, "
                                         "which never sends to it")
    succ: list[list[int]] = [[] for _ in range(S)]
    indeg = np.zeros(S, dtype=np.int64)
    for v, ps in enumerate(preds):
        for u in ps:
            succ[u].append(v)
        indeg[v] = len(ps)
    seq = np.zeros(S, dtype=np.int32)
    tb_of = np.zeros(S, dtype=np.int64)
    for (gid, tid), k in tb_index.items():
        for i, x in enumerate(gpus[gid]["tbs"][tid][3]):
            seq[x.node], tb_of[x.node] = i + 1, k
    level = np.zeros(S, dtype=np.int64)
    ready = deque(np.flatnonzero(indeg == 0).tolist())
    order = []
    while ready:
        v = ready.popleft()
        order.append(v)
        for w in succ[v]:
            level[w] = max(level[w], level[v] + 1)
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    if len(order) < S:
        stuck = [steps[v] for v in range(S) if indeg[v] > 0]
        first = min(stuck, key=lambda x: (x.gpu, x.tb, x.s))
        raise MscclVerificationError(f"deadlock: {len(stuck)} steps can never run, e.g. {first.where()} (it waits for its "
                                     "dependency, the previous step of its threadblock, or a send that cannot happen first)")
    hb = _happens_before(n, steps, preds, level, seq, tb_of, tb_index)
    return steps, order, match, hb


def _happens_before(n, steps, preds, level, seq, tb_of, tb_index):
    """``hb(a, b)`` for two steps of one GPU: does a finish before b starts, whatever the timing?

    Vector clocks over that GPU's threadblocks, propagated level by level through the whole
    program (a path may run through other GPUs), one GPU at a time so memory stays
    steps x threadblocks-per-GPU."""
    S = len(steps)
    gpu_of = np.array([x.gpu for x in steps], dtype=np.int64)
    tbs_of: dict[int, list[int]] = defaultdict(list)      # gpu -> its threadblocks' indices, in id order
    for (gid, _), k in sorted(tb_index.items()):
        tbs_of[gid].append(k)
    busy = np.unique(gpu_of).tolist()
    check_race_work(cells=(S + sum(len(p) for p in preds)) * sum(len(tbs_of[g]) for g in busy),
                    passes=len(busy) * (int(level.max(initial=0)) + 1))
    eu = np.array([u for v in range(S) for u in preds[v]], dtype=np.int64)
    ev = np.array([v for v in range(S) for _ in preds[v]], dtype=np.int64)
    by_level = np.lexsort((ev, level[ev])) if len(ev) else ev      # by target's level, then target
    eu, ev = eu[by_level], ev[by_level]
    lv = level[ev]
    cuts = np.flatnonzero(np.diff(lv)) + 1 if len(lv) else lv
    edge_groups = []                 # per level: (sources, targets, reduceat starts)
    for grp in (np.split(np.arange(len(ev)), cuts) if len(ev) else []):
        first = np.concatenate(([True], ev[grp][1:] != ev[grp][:-1]))
        edge_groups.append((int(lv[grp[0]]), eu[grp], ev[grp][first], np.flatnonzero(first)))
    small = np.int16 if int(seq.max(initial=0)) < np.iinfo(np.int16).max else np.int32   # half the traffic
    rows: dict[int, tuple[np.ndarray, dict]] = {}
    row_of = np.zeros(S, dtype=np.int64)     # a step's row in its own GPU's kept clock rows
    for g in busy:
        cols = {k: j for j, k in enumerate(tbs_of[g])}
        mine = np.flatnonzero(gpu_of == g)
        clock = np.zeros((S, len(cols)), dtype=small)
        own_col = np.array([cols[t] for t in tb_of[mine]], dtype=np.int64)
        own_lv = level[mine]
        order = np.argsort(own_lv, kind="stable")
        mine_s, col_s, lv_s = mine[order], own_col[order], own_lv[order]
        bounds = np.searchsorted(lv_s, np.arange(int(level.max()) + 2))
        groups = {L: (src, tgt, starts) for L, src, tgt, starts in edge_groups}
        for L in range(int(level.max()) + 1):
            if L in groups:            # every source is on an earlier level: its clock is final
                src, tgt, starts = groups[L]
                clock[tgt] = np.maximum.reduceat(clock[src], starts, axis=0)
            a, b = bounds[L], bounds[L + 1]
            if b > a:
                clock[mine_s[a:b], col_s[a:b]] = seq[mine_s[a:b]]
        rows[g] = (clock[mine], cols)      # hb(a, b) reads only b's row, and b is on g
        row_of[mine] = np.arange(len(mine))

    def hb(a: int, b: int) -> bool:
        clock, cols = rows[int(gpu_of[b])]
        return bool(clock[row_of[b], cols[int(tb_of[a])]] >= seq[a])
    return hb


class _Val:
    """A cell's content: the message chunk, contribution counts, and whose value it is (rank,
    version), plus the channel and the step it last arrived by."""
    __slots__ = ("chunk", "counts", "owner", "version", "chan", "via")

    def __init__(self, chunk, counts, owner, version, chan, via=-1):
        self.chunk, self.counts, self.owner, self.version, self.chan = chunk, counts, owner, version, chan
        self.via = via   # the receiving step that brought the value to this gpu (-1: its own)


def from_msccl_xml(text: str, name: str | None = None) -> CollectivePattern:
    """Read an MSCCL-XML program as a pattern, checked end to end (see the module docstring).

    Returns:
        The verified pattern: K = nchunksperloop cells as chunks (neighbours that always travel
        together merged), chunk graphs = channels, ranks = GPU ids.

    Raises:
        MscclVerificationError: (a VerificationError) the program runs but does not compute its
            collective: unmatched sends and receives, a deadlock, a race, a read of an empty cell,
            a reduction of the wrong chunk, or a final buffer that does not hold the collective.
        MscclError: unsafe or malformed XML (missing or bad attributes), or a program that cannot be
            written as flows (e.g. two other ranks' values added together in scratch before the
            rank's own joins them).
        VerificationError: the rebuilt pattern fails :func:`reactccl.pattern.verify`.
    """
    xml_root = _parse(text)
    coll, n, K, inplace, gpus, root = _read_program(xml_root)
    _check_program_size(n, K, coll, gpus)
    name = name if name is not None else xml_root.get("name", "msccl")
    steps, order, match, hb = _order(n, gpus)
    blk = K // n if coll.is_blocked else K
    if coll.needs_root and root is None:
        recv_ranks = {x.gpu for x in steps if x.type in RECVS}
        send_ranks = {x.gpu for x in steps if x.type in SENDS}
        cands = [r for r in range(n) if (r not in recv_ranks if coll is Collective.BROADCAST else r not in send_ranks)]
        if len(cands) != 1:
            raise MscclError(f"{coll.value}: no root attribute and the root cannot be told from the program "
                             f"(candidates {cands})")
        root = cands[0]
    if coll.needs_root and not 0 <= root < n:
        raise MscclError(f"algo: root {root} out of range 0..{n - 1}")

    def cell(r: int, buf: str, off: int) -> tuple[int, str, int]:
        """The physical cell (in-place collectives alias one buffer onto a block of the other)."""
        if inplace:
            if coll is Collective.ALLGATHER and buf == "i":
                return (r, "o", r * blk + off)
            if coll is Collective.REDUCESCATTER and buf == "o":
                return (r, "i", r * blk + off)
            if coll not in (Collective.ALLGATHER, Collective.REDUCESCATTER) and buf == "o":
                return (r, "i", off)
        return (r, buf, off)

    state: dict[tuple, _Val] = {}
    version = np.full((n, K), -1, dtype=np.int64)
    for r in range(n):
        if coll is Collective.ALLGATHER:
            cells = [(cell(r, "i", j), r * blk + j) for j in range(blk)]
        elif coll is Collective.BROADCAST:
            cells = [(cell(r, "i", j), j) for j in range(K)] if r == root else []
        else:
            cells = [(cell(r, "i", j), j) for j in range(K)]
        for key, c in cells:
            e = np.zeros(n, dtype=np.int64)
            e[r] = 1
            state[key] = _Val(c, e, r, 0, -1)
            version[r, c] = 0
    last_write: dict[tuple, int] = {}
    readers: dict[tuple, list[int]] = defaultdict(list)
    records: list[tuple] = []          # (event, kind, src, dst, chunk, read version, write version, chan)
    fifo: dict[int, list[_Val]] = {}    # sending step node -> the values it sent

    def touch(x: _Step, key, write: bool) -> None:
        w = last_write.get(key)
        if w is not None and not hb(w, x.node):
            raise MscclVerificationError(f"race on gpu {key[0]} cell {key[1]}[{key[2]}]: {x.where()} and "
                                         f"{steps[w].where()} both use it and neither waits for the other")
        if write:
            for rd in readers[key]:
                if rd != x.node and not hb(rd, x.node):
                    raise MscclVerificationError(f"race on gpu {key[0]} cell {key[1]}[{key[2]}]: {x.where()} "
                                                 f"overwrites what {steps[rd].where()} reads, and neither waits for "
                                                 "the other")
            last_write[key], readers[key] = x.node, []
        else:
            readers[key].append(x.node)

    def read(x: _Step, buf: str, off: int) -> list[_Val]:
        out = []
        for j in range(x.cnt):
            key = cell(x.gpu, buf, off + j)
            touch(x, key, False)
            if key not in state:
                raise MscclVerificationError(f"{x.where()}: reads {buf}[{off + j}], which holds no data yet")
            out.append(state[key])
        return out

    def write(x: _Step, buf: str, off: int, vals: list[_Val]) -> None:
        for j, v in enumerate(vals):
            key = cell(x.gpu, buf, off + j)
            touch(x, key, True)
            state[key] = v

    def own(x: _Step, vals: list[_Val], event: int) -> list[_Val]:
        """The rank's own values for ``vals``: another rank's value becomes its own by a copy flow."""
        r, out = x.gpu, []
        for v in vals:
            if v.owner != r:
                version[r, v.chunk] += 1
                records.append((v.via, 1, v.owner, r, v.chunk, v.version, int(version[r, v.chunk]), v.chan))
                v = _Val(v.chunk, v.counts, r, int(version[r, v.chunk]), v.chan, v.via)
            elif v.version != version[r, v.chunk]:
                raise MscclError(f"{x.where()}: uses an older value of chunk {v.chunk} than gpu {r} holds "
                                 "elsewhere; a pattern keeps one value per rank and chunk")
            out.append(v)
        return out

    def reduce(x: _Step, a: list[_Val], b: list[_Val], event: int) -> list[_Val]:
        r, out = x.gpu, []
        for va, vb in zip(a, b):
            if va.chunk != vb.chunk:
                raise MscclVerificationError(f"{x.where()}: adds chunk {vb.chunk} into chunk {va.chunk}")
            mine, other = (va, vb) if va.owner == r else (vb, va)
            if mine.owner != r or other.owner == r or mine.version != version[r, mine.chunk]:
                raise MscclError(f"{x.where()}: adds two values of chunk {va.chunk} (of gpus {va.owner} and "
                                 f"{vb.owner}) that are not gpu {r}'s current own value and another gpu's; "
                                 "a pattern cannot express that")
            version[r, mine.chunk] += 1
            records.append((event * (len(steps) + 1) + other.via + 1, 0, other.owner, r, mine.chunk, other.version,
                            int(version[r, mine.chunk]), other.chan))
            out.append(_Val(mine.chunk, mine.counts + other.counts, r, int(version[r, mine.chunk]), other.chan, event))
        return out

    for v in order:
        x = steps[v]
        t = x.type
        chan = gpus[x.gpu]["tbs"][x.tb][2]
        got = None
        if t in RECVS:
            got = [_Val(u.chunk, u.counts, u.owner, u.version, chan, v) for u in fifo.pop(match[v])]
        sent = None
        if t == "s":
            sent = read(x, x.sbuf, x.soff)
        elif t in ("r", "rcs"):
            write(x, x.dbuf, x.doff, got)
            sent = got if t == "rcs" else None
        elif t in REDUCES:
            res = reduce(x, read(x, x.sbuf, x.soff), got, v)
            if t != "rrs":
                write(x, x.dbuf, x.doff, res)
            sent = res if t != "rrc" else None
        elif t == "cpy":
            write(x, x.dbuf, x.doff, read(x, x.sbuf, x.soff))
        elif t == "re":
            write(x, x.dbuf, x.doff, reduce(x, read(x, x.dbuf, x.doff), read(x, x.sbuf, x.soff), v))
        if sent is not None:
            sent = own(x, sent, v)
            if t in ("s", "rcs", "rrcs"):      # the cells now hold the rank's own value
                buf, off = (x.sbuf, x.soff) if t == "s" else (x.dbuf, x.doff)
                for j, val in enumerate(sent):
                    key = cell(x.gpu, buf, off + j)
                    if state.get(key) is not None and state[key].chunk == val.chunk:
                        state[key] = val
            fifo[v] = sent
    return _finish(coll, n, K, blk, root, state, cell, version, records, name, gpus, steps, own)


def _finish(coll, n, K, blk, root, state, cell, version, records, name, gpus, steps, own):
    full = np.ones(n, dtype=np.int64)
    need = []
    for r in range(n):
        if coll is Collective.REDUCESCATTER:
            need += [(r, cell(r, "o", j), r * blk + j) for j in range(blk)]
        elif coll is Collective.REDUCE:
            need += [(r, cell(r, "o", j), j) for j in range(K)] if r == root else []
        else:
            need += [(r, cell(r, "o", j), j) for j in range(K)]
    end = len(steps)
    for r, key, c in need:
        v = state.get(key)
        if v is None or v.chunk != c:
            got = "nothing" if v is None else f"chunk {v.chunk}"
            raise MscclVerificationError(f"{coll.value} not computed: gpu {r} output cell {key[1]}[{key[2]}] holds {got}, "
                                         f"expected chunk {c}")
        if coll in (Collective.ALLGATHER, Collective.BROADCAST):
            expect = np.zeros(n, dtype=np.int64)
            expect[c // blk if coll is Collective.ALLGATHER else root] = 1
        else:
            expect = full
        if not np.array_equal(v.counts, expect):
            bad = np.flatnonzero(v.counts != expect)
            raise MscclVerificationError(f"{coll.value} not computed: gpu {r} chunk {c} holds rank {int(bad[0])}'s data "
                                         f"{int(v.counts[bad[0]])} times (expected {int(expect[bad[0]])})")
        if v.owner != r:
            x = _Step()
            x.gpu, x.tb, x.s, x.type = r, -1, -1, "end"
            own(x, [v], end)
    return _build(coll, n, K, root, records, name)


def _build(coll, n, K, root, records, name):
    groups: dict[tuple, list] = defaultdict(list)
    for ev, kind, src, dst, c, rd, wr, chan in records:
        groups[(ev, kind, src, dst, chan)].append((c, rd, wr))
    chunk_graph = np.full(K, -1, dtype=np.int64)
    for key, items in groups.items():     # a cell's graph: the channel it first travels on
        for c, _, _ in items:
            if chunk_graph[c] < 0:
                chunk_graph[c] = max(key[4], 0)
    chunk_graph[chunk_graph < 0] = 0      # cells that never travel (one rank, or a root's own data)
    flows = []
    for (ev, kind, src, dst, chan), items in groups.items():   # one chunk graph per flow
        by_g: dict[int, list] = defaultdict(list)
        for it in items:
            by_g[int(chunk_graph[it[0]])].append(it)
        for g, its in sorted(by_g.items()):
            flows.append((kind, src, dst, sorted(its)))
    F = len(flows)
    rec = [(f, src, dst, c, rd, wr) for f, (kind, src, dst, its) in enumerate(flows) for c, rd, wr in its]
    if rec:
        rf, rs, rdst, rc, rrd, rwr = (np.array(col, dtype=np.int64) for col in zip(*rec))
    else:
        rf = rs = rdst = rc = rrd = rwr = np.zeros(0, dtype=np.int64)
    is_red = np.array([fl[0] == 0 for fl in flows], dtype=bool)
    step = assign_steps(F, rf, rs, rdst, rc, rrd, rwr, is_red)
    ptr = np.concatenate(([0], np.cumsum([len(fl[3]) for fl in flows]))).astype(np.int64)
    idx = np.array([c for fl in flows for c, _, _ in fl[3]], dtype=np.int64)
    order = np.lexsort((np.array([fl[2] for fl in flows], dtype=np.int64),
                        np.array([fl[1] for fl in flows], dtype=np.int64), step)) if F else np.zeros(0, dtype=np.int64)
    counts = np.diff(ptr)
    new_ptr = np.concatenate(([0], np.cumsum(counts[order]))).astype(np.int64)
    new_idx = np.concatenate([idx[ptr[f]:ptr[f + 1]] for f in order]) if F else idx
    p = CollectivePattern.from_arrays(
        coll, n, np.full(K, 1.0 / K), chunk_graph, step[order], np.array([flows[f][1] for f in order], dtype=np.int64),
        np.array([flows[f][2] for f in order], dtype=np.int64),
        np.array([0 if flows[f][0] == 0 else 1 for f in order], dtype=np.int64), new_ptr, new_idx,
        root=root if coll.needs_root else None, name=name or "msccl")
    p = merge_chunks(merge_flows(p))
    verify(p)
    return p


def load_msccl_xml(path: str | Path) -> CollectivePattern:
    """:func:`from_msccl_xml` of a file (the pattern is named after the file), read as every
    pattern file is: a regular file of at most ``MAX_FILE_BYTES`` (:func:`reactccl.pattern.io.read_bounded`).

    Raises:
        MscclError: as :func:`from_msccl_xml`, or bytes that are not UTF-8.
        PatternError: not a regular file, or too large.
    """
    data = read_bounded(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MscclError(f"{path}: not valid UTF-8: byte 0x{e.object[e.start]:02x} at offset {e.start}") from None
    return from_msccl_xml(text, name=Path(path).stem)

"""JSON I/O for patterns: schema ``reactccl.pattern/1``, read and written losslessly.

Document::

    {"schema": "reactccl.pattern/1", "name": "ring", "collective": "allreduce",
     "root": null, "num_ranks": 4,
     "chunks": [{"id": 0, "size": 0.25, "graph": 0}, ...],
     "flows": [{"step": 0, "src": 1, "dst": 2, "chunks": [0], "op": "reduce"}, ...]}

Every field is required; unknown fields, repeated keys and wrong types are errors that
name the field and index (e.g. ``flows[12].dst``), echoing at most an excerpt of a value
(:func:`reactccl.pattern.types.excerpt`). Hostile input gets the same kind of one-line
:class:`PatternError`: anything but a regular file (a FIFO, a device, a folder: refused
before reading, so ``pattern verify`` on a FIFO cannot block), a file over
:data:`MAX_FILE_BYTES` (checked before and while reading), bytes that are not UTF-8, nesting
deeper than the JSON parser allows, a key given twice in one object (JSON would keep the
last one silently), and integers outside their field's range (ranks, chunk ids, steps and
graph ids below 2^31, see :data:`reactccl.pattern.ir.MAX_INDEX`; an integer too long for
Python to convert is named with its field too).

Step numbers are logical times: only their order means something. A file's steps are
*compacted* on reading (0, 2000000 -> 0, 1, keeping the order), so every command that reads
a pattern file (verify, show, simulate, ``--react``, export) sees the same dense steps.

Reading is vectorised for well-formed lists (a 10^6-chunk file in ~2 s); anything the fast
path does not accept is read again entry by entry, which names the first bad entry.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np

from .ir import MAX_INDEX, CollectivePattern
from .types import Collective, Op, PatternError, excerpt

__all__ = ["SCHEMA", "MAX_FILE_BYTES", "read_bounded", "to_dict", "from_dict", "dumps", "loads", "save", "load"]

# The largest pattern file read: parsing takes ~15 bytes of Python objects per byte of JSON, so
# this keeps a load near 4 GB; a 1024-rank ring (2M flows) is ~130 MB.
MAX_FILE_BYTES = 256 << 20

SCHEMA = "reactccl.pattern/1"
_TOP = ("schema", "name", "collective", "root", "num_ranks", "chunks", "flows")
_CHUNK = ("id", "size", "graph")
_FLOW = ("step", "src", "dst", "chunks", "op")


def to_dict(p: CollectivePattern) -> dict[str, Any]:
    """The pattern as a JSON-ready dict (flows in stored order)."""
    chunks = [{"id": i, "size": float(s), "graph": int(g)}
              for i, (s, g) in enumerate(zip(p.chunk_size.tolist(), p.chunk_graph.tolist(), strict=True))]
    ptr, idx = p.chunk_ptr.tolist(), p.chunk_idx.tolist()
    ops = [Op.from_code(o).value for o in p.op.tolist()]
    flows = [{"step": s, "src": a, "dst": b, "chunks": idx[ptr[i]:ptr[i + 1]], "op": ops[i]}
             for i, (s, a, b) in enumerate(zip(p.step.tolist(), p.src.tolist(), p.dst.tolist(), strict=True))]
    return {"schema": SCHEMA, "name": p.name, "collective": p.collective.value, "root": p.root,
            "num_ranks": p.num_ranks, "chunks": chunks, "flows": flows}


class _HugeInt:
    """Stands in for a JSON integer too long for Python to convert (over 4300 digits), so the
    field that holds it can be named."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _int(v: Any, where: str, lo: int = 0, hi: int = MAX_INDEX) -> int:
    if isinstance(v, _HugeInt):
        raise PatternError(f"{where}: an integer of {v.digits} digits is out of range {lo}..{hi}")
    if isinstance(v, bool) or not isinstance(v, int):
        raise PatternError(f"{where}: expected an integer, got {type(v).__name__} {_short(v)}")
    if not lo <= v <= hi:
        raise PatternError(f"{where}: {_short(v)} is out of range {lo}..{hi}")
    return v


def _num(v: Any, where: str) -> float:
    if isinstance(v, _HugeInt):
        raise PatternError(f"{where}: an integer of {v.digits} digits is out of range")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise PatternError(f"{where}: expected a number, got {type(v).__name__} {_short(v)}")
    if isinstance(v, int) and not -1e300 < v < 1e300:
        raise PatternError(f"{where}: {_short(v)} is out of range")
    return float(v)


def _short(v: Any) -> str:
    """A value of the file as an error message echoes it: :func:`excerpt` (60 characters)."""
    return excerpt(v)


def _fields(obj: Any, names: tuple[str, ...], where: str) -> None:
    if not isinstance(obj, dict):
        raise PatternError(f"{where}: expected an object, got {type(obj).__name__}")
    unknown = [k for k in obj if k not in names]
    if unknown:
        raise PatternError(f"{where}: unknown field {_short(unknown[0])} (allowed: {', '.join(names)})")
    missing = [k for k in names if k not in obj]
    if missing:
        raise PatternError(f"{where}: missing field {missing[0]!r}")


def from_dict(doc: Any) -> CollectivePattern:
    """Parse a ``reactccl.pattern/1`` document (structure checked, not verified).

    Raises:
        PatternError: naming the field and index that is wrong.
    """
    _fields(doc, _TOP, "pattern")
    if doc["schema"] != SCHEMA:
        raise PatternError(f"schema: expected {SCHEMA!r}, got {_short(doc['schema'])}")
    if not isinstance(doc["name"], str):
        raise PatternError(f"name: expected a string, got {type(doc['name']).__name__}")
    if not isinstance(doc["collective"], str):
        raise PatternError(f"collective: expected a string, got {type(doc['collective']).__name__}")
    try:
        coll = Collective(doc["collective"])
    except ValueError:
        raise PatternError(f"collective: unknown collective {_short(doc['collective'])}; expected one of "
                           f"{[c.value for c in Collective]}") from None
    n = _int(doc["num_ranks"], "num_ranks", 1)
    root = None if doc["root"] is None else _int(doc["root"], "root", 0, n - 1)
    if not isinstance(doc["chunks"], list):
        raise PatternError("chunks: expected a list")
    if not isinstance(doc["flows"], list):
        raise PatternError("flows: expected a list")
    cols = _columns_fast(doc["chunks"], doc["flows"])
    sizes, graphs, step, src, dst, op, ptr, idx = cols if cols is not None else _columns(doc["chunks"], doc["flows"])
    if len(step) and step.min() >= 0:       # only the order of steps means something (module docstring)
        step = np.unique(step, return_inverse=True)[1].astype(np.int64).reshape(-1)
    return CollectivePattern.from_arrays(coll, n, sizes, graphs, step, src, dst, op, ptr, idx, root=root,
                                         name=doc["name"])


def _ints(values: list, lo: int = -MAX_INDEX, hi: int = MAX_INDEX) -> np.ndarray | None:
    """``values`` as int64 when every one is a (non-bool) int in ``lo..hi``, else None."""
    if values and set(map(type, values)) != {int}:
        return None
    try:
        a = np.array(values, dtype=np.int64)
    except OverflowError:
        return None
    return a if not len(a) or (int(a.min()) >= lo and int(a.max()) <= hi) else None


def _columns_fast(chunks: list, flows: list):
    """The pattern's columns read without a Python check per entry, or None when any entry
    is not plainly well formed (then :func:`_columns` reads it again and names what is wrong)."""
    try:
        if (chunks and (set(map(type, chunks)) != {dict} or set(map(len, chunks)) != {len(_CHUNK)})) or \
                (flows and (set(map(type, flows)) != {dict} or set(map(len, flows)) != {len(_FLOW)})):
            return None
        ids, sizes, graphs = (list(map(itemgetter(k), chunks)) for k in _CHUNK)
        steps, srcs, dsts, lists, ops = (list(map(itemgetter(k), flows)) for k in _FLOW)
    except KeyError:
        return None
    if sizes and set(map(type, sizes)) != {float}:
        return None
    cid, graph, step, src, dst = (_ints(v) for v in (ids, graphs, steps, srcs, dsts))
    if cid is None or graph is None or step is None or src is None or dst is None:
        return None
    if not np.array_equal(cid, np.arange(len(cid))):
        return None
    if lists and set(map(type, lists)) != {list}:
        return None
    if ops and (set(map(type, ops)) != {str} or not set(ops) <= {"reduce", "copy"}):
        return None
    idx = _ints(list(chain.from_iterable(lists)))
    if idx is None:
        return None
    ptr = np.zeros(len(flows) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, lists), dtype=np.int64, count=len(lists)), out=ptr[1:])
    op = (np.array(ops, dtype=object) == "copy").astype(np.int8) if ops else np.zeros(0, dtype=np.int8)
    return sizes, graph, step, src, dst, op, ptr, idx


def _columns(chunks: list, flows: list):
    """The pattern's columns read entry by entry, naming the first field that is wrong."""
    sizes, graphs = [], []
    for i, c in enumerate(chunks):
        w = f"chunks[{i}]"
        _fields(c, _CHUNK, w)
        if _int(c["id"], w + ".id", -MAX_INDEX) != i:
            raise PatternError(f"{w}.id: expected {i} (ids are 0..C-1 in order), got {c['id']}")
        sizes.append(_num(c["size"], w + ".size"))
        graphs.append(_int(c["graph"], w + ".graph", -MAX_INDEX))
    F = len(flows)
    step = np.empty(F, dtype=np.int64)
    src = np.empty(F, dtype=np.int64)
    dst = np.empty(F, dtype=np.int64)
    op = np.empty(F, dtype=np.int8)
    ptr = np.zeros(F + 1, dtype=np.int64)
    idx: list[int] = []
    for i, f in enumerate(flows):
        w = f"flows[{i}]"
        _fields(f, _FLOW, w)
        step[i] = _int(f["step"], w + ".step", -MAX_INDEX)
        src[i] = _int(f["src"], w + ".src", -MAX_INDEX)   # in 0..N-1: checked by the IR, naming the rank
        dst[i] = _int(f["dst"], w + ".dst", -MAX_INDEX)
        if not isinstance(f["chunks"], list):
            raise PatternError(f"{w}.chunks: expected a list of chunk ids")
        idx.extend(_int(c, f"{w}.chunks[{j}]", -MAX_INDEX) for j, c in enumerate(f["chunks"]))
        ptr[i + 1] = len(idx)
        if not isinstance(f["op"], str) or f["op"] not in ("reduce", "copy"):
            raise PatternError(f"{w}.op: expected 'reduce' or 'copy', got {_short(f['op'])}")
        op[i] = Op(f["op"]).code
    return sizes, graphs, step, src, dst, op, ptr, np.asarray(idx, dtype=np.int64)


def dumps(p: CollectivePattern, indent: int | None = None) -> str:
    """Serialise to a JSON string. With ``indent=None`` each flow is on one line."""
    d = to_dict(p)
    if indent is not None:
        return json.dumps(d, indent=indent)
    head = {k: v for k, v in d.items() if k not in ("chunks", "flows")}
    lines = [json.dumps(head)[:-1] + ',\n "chunks": [']
    lines.append(",\n".join("  " + json.dumps(c) for c in d["chunks"]) + "],\n \"flows\": [")
    lines.append(",\n".join("  " + json.dumps(f) for f in d["flows"]) + "]}\n")
    return "\n".join(lines)


def loads(text: str | bytes) -> CollectivePattern:
    """Parse a JSON string or UTF-8 bytes (see :func:`from_dict`).

    Raises:
        PatternError: not UTF-8, not JSON, nested deeper than the parser allows,
            or a malformed pattern (naming the field and index).
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise PatternError(f"not valid UTF-8: byte 0x{e.object[e.start]:02x} at offset {e.start}") from None
    try:
        try:
            doc = json.loads(text, object_pairs_hook=_unique_keys)
        except ValueError as e:     # Python refuses to convert an integer of over 4300 digits
            if isinstance(e, (json.JSONDecodeError, PatternError)) or "integer string conversion" not in str(e):
                raise
            doc = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_parse_int)
    except json.JSONDecodeError as e:
        raise PatternError(f"not valid JSON: {e}") from None
    except RecursionError:
        raise PatternError("not a pattern: JSON nested deeper than the parser allows "
                           "(a pattern nests 4 levels: document, flows, flow, chunks)") from None
    return from_dict(doc)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's dict, refusing a key given twice (``json`` would keep the last silently)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        counts: dict[str, int] = {}
        for k, _ in pairs:
            counts[k] = counts.get(k, 0) + 1
        dup = next(k for k, c in counts.items() if c > 1)
        raise PatternError(f"key {_short(dup)} given twice in one object (keys: "
                           f"{excerpt(', '.join(k for k, _ in pairs), quote=False)})")
    return d


def _parse_int(digits: str) -> int | _HugeInt:
    return _HugeInt(len(digits.lstrip("-"))) if len(digits) > 4000 else int(digits)


def save(p: CollectivePattern, path: str | Path) -> None:
    """Write the pattern to ``path`` as JSON."""
    Path(path).write_text(dumps(p))


def read_bounded(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """Read at most ``max_bytes`` bytes of a pattern file (JSON or MSCCL XML).

    Only a regular file is read: a FIFO, a device, a folder or a socket is refused before
    any read (the file is opened without waiting, so a FIFO without a writer does not block).
    The size is checked before reading and enforced while reading (a file that grows).

    Raises:
        PatternError: not a regular file, or larger than ``max_bytes``.
        OSError: the file cannot be opened or read.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))   # a FIFO's open must not wait for a writer
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                    else "a device")
            raise PatternError(f"{path}: is {kind}, not a regular file; a pattern file must be a regular file")
        fh = open(fd, "rb")    # noqa: SIM115 - closed below, and fd with it
    except BaseException:
        os.close(fd)
        raise
    with fh:
        size = st.st_size
        if size > max_bytes:
            raise PatternError(f"{path}: {size} bytes is larger than the {max_bytes >> 20} MiB a pattern file may be")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise PatternError(f"{path}: more than the {max_bytes >> 20} MiB a pattern file may be "
                           f"(stopped reading there)")
    return data


def load(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> CollectivePattern:
    """Read a pattern from a JSON file of at most ``max_bytes`` bytes (see :func:`read_bounded`).

    Raises:
        PatternError: the file is larger than ``max_bytes`` or not a pattern (see :func:`loads`).
        OSError: the file cannot be read.
    """
    return loads(read_bounded(path, max_bytes))

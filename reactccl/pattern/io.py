"""JSON I/O for patterns: schema ``reactccl.pattern/1``, read and written losslessly.

Document::

    {"schema": "reactccl.pattern/1", "name": "ring", "collective": "allreduce",
     "root": null, "num_ranks": 4,
     "chunks": [{"id": 0, "size": 0.25, "graph": 0}, ...],
     "flows": [{"step": 0, "src": 1, "dst": 2, "chunks": [0], "op": "reduce"}, ...]}

Every field is required; unknown fields and wrong types are errors that name
the field and index (e.g. ``flows[12].dst``). Hostile input gets the same kind of
one-line :class:`PatternError`: a file over :data:`MAX_FILE_BYTES` (checked while
reading, so ``/dev/zero`` is refused too), bytes that are not UTF-8, nesting deeper
than the JSON parser allows, and integers outside their field's range (ranks,
chunk ids, steps and graph ids below 2^31, see :data:`reactccl.pattern.ir.MAX_INDEX`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .ir import MAX_INDEX, CollectivePattern
from .types import Collective, Op, PatternError

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
              for i, (s, g) in enumerate(zip(p.chunk_size.tolist(), p.chunk_graph.tolist()))]
    ptr, idx = p.chunk_ptr.tolist(), p.chunk_idx.tolist()
    ops = [Op.from_code(o).value for o in p.op.tolist()]
    flows = [{"step": s, "src": a, "dst": b, "chunks": idx[ptr[i]:ptr[i + 1]], "op": ops[i]}
             for i, (s, a, b) in enumerate(zip(p.step.tolist(), p.src.tolist(), p.dst.tolist()))]
    return {"schema": SCHEMA, "name": p.name, "collective": p.collective.value, "root": p.root,
            "num_ranks": p.num_ranks, "chunks": chunks, "flows": flows}


def _int(v: Any, where: str, lo: int = 0, hi: int = MAX_INDEX) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise PatternError(f"{where}: expected an integer, got {type(v).__name__} {_short(v)}")
    if not lo <= v <= hi:
        raise PatternError(f"{where}: {_short(v)} is out of range {lo}..{hi}")
    return v


def _num(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise PatternError(f"{where}: expected a number, got {type(v).__name__} {_short(v)}")
    if isinstance(v, int) and not -1e300 < v < 1e300:
        raise PatternError(f"{where}: {_short(v)} is out of range")
    return float(v)


def _short(v: Any) -> str:
    """``repr(v)`` cut to 60 characters (a hostile value may be megabytes long)."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 190:
        return f"an integer of {v.bit_length()} bits"
    r = repr(v) if not isinstance(v, (list, dict)) else f"a {type(v).__name__} of {len(v)}"
    return r if len(r) <= 60 else r[:57] + "..."


def _fields(obj: Any, names: tuple[str, ...], where: str) -> None:
    if not isinstance(obj, dict):
        raise PatternError(f"{where}: expected an object, got {type(obj).__name__}")
    unknown = [k for k in obj if k not in names]
    if unknown:
        raise PatternError(f"{where}: unknown field {unknown[0]!r} (allowed: {', '.join(names)})")
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
        raise PatternError(f"schema: expected {SCHEMA!r}, got {doc['schema']!r}")
    if not isinstance(doc["name"], str):
        raise PatternError(f"name: expected a string, got {type(doc['name']).__name__}")
    if not isinstance(doc["collective"], str):
        raise PatternError(f"collective: expected a string, got {type(doc['collective']).__name__}")
    try:
        coll = Collective(doc["collective"])
    except ValueError:
        raise PatternError(f"collective: unknown collective {doc['collective']!r}; expected one of "
                           f"{[c.value for c in Collective]}") from None
    n = _int(doc["num_ranks"], "num_ranks", 1)
    root = None if doc["root"] is None else _int(doc["root"], "root", 0, n - 1)
    if not isinstance(doc["chunks"], list):
        raise PatternError("chunks: expected a list")
    if not isinstance(doc["flows"], list):
        raise PatternError("flows: expected a list")
    sizes, graphs = [], []
    for i, c in enumerate(doc["chunks"]):
        w = f"chunks[{i}]"
        _fields(c, _CHUNK, w)
        if _int(c["id"], w + ".id", -MAX_INDEX) != i:
            raise PatternError(f"{w}.id: expected {i} (ids are 0..C-1 in order), got {c['id']}")
        sizes.append(_num(c["size"], w + ".size"))
        graphs.append(_int(c["graph"], w + ".graph", -MAX_INDEX))
    F = len(doc["flows"])
    step = np.empty(F, dtype=np.int64)
    src = np.empty(F, dtype=np.int64)
    dst = np.empty(F, dtype=np.int64)
    op = np.empty(F, dtype=np.int8)
    ptr = np.zeros(F + 1, dtype=np.int64)
    idx: list[int] = []
    for i, f in enumerate(doc["flows"]):
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
    return CollectivePattern.from_arrays(coll, n, sizes, graphs, step, src, dst, op, ptr,
                                         np.asarray(idx, dtype=np.int64), root=root, name=doc["name"])


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
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise PatternError(f"not valid JSON: {e}") from None
    except RecursionError:
        raise PatternError("not a pattern: JSON nested deeper than the parser allows "
                           "(a pattern nests 4 levels: document, flows, flow, chunks)") from None
    return from_dict(doc)


def save(p: CollectivePattern, path: str | Path) -> None:
    """Write the pattern to ``path`` as JSON."""
    Path(path).write_text(dumps(p))


def read_bounded(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """Read at most ``max_bytes`` bytes of a pattern file (JSON or MSCCL XML).

    The size is checked before reading and enforced while reading (a device or
    pipe has no size to stat).

    Raises:
        PatternError: the file is larger than ``max_bytes``.
        OSError: the file cannot be read.
    """
    with open(path, "rb") as fh:
        try:
            size = os.fstat(fh.fileno()).st_size
        except OSError:
            size = 0
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

"""JSON I/O for patterns: schema ``reactccl.pattern/1``, read and written losslessly.

Document::

    {"schema": "reactccl.pattern/1", "name": "ring", "collective": "allreduce",
     "root": null, "num_ranks": 4,
     "chunks": [{"id": 0, "size": 0.25, "graph": 0}, ...],
     "flows": [{"step": 0, "src": 1, "dst": 2, "chunks": [0], "op": "reduce"}, ...]}

Every field is required; unknown fields and wrong types are errors that name
the field and index (e.g. ``flows[12].dst``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .ir import CollectivePattern
from .types import Collective, Op, PatternError

__all__ = ["SCHEMA", "to_dict", "from_dict", "dumps", "loads", "save", "load"]

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


def _int(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise PatternError(f"{where}: expected an integer, got {type(v).__name__} {v!r}")
    return v


def _num(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise PatternError(f"{where}: expected a number, got {type(v).__name__} {v!r}")
    return float(v)


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
    root = None if doc["root"] is None else _int(doc["root"], "root")
    n = _int(doc["num_ranks"], "num_ranks")
    if not isinstance(doc["chunks"], list):
        raise PatternError("chunks: expected a list")
    if not isinstance(doc["flows"], list):
        raise PatternError("flows: expected a list")
    sizes, graphs = [], []
    for i, c in enumerate(doc["chunks"]):
        w = f"chunks[{i}]"
        _fields(c, _CHUNK, w)
        if _int(c["id"], w + ".id") != i:
            raise PatternError(f"{w}.id: expected {i} (ids are 0..C-1 in order), got {c['id']}")
        sizes.append(_num(c["size"], w + ".size"))
        graphs.append(_int(c["graph"], w + ".graph"))
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
        step[i] = _int(f["step"], w + ".step")
        src[i] = _int(f["src"], w + ".src")
        dst[i] = _int(f["dst"], w + ".dst")
        if not isinstance(f["chunks"], list):
            raise PatternError(f"{w}.chunks: expected a list of chunk ids")
        idx.extend(_int(c, f"{w}.chunks[{j}]") for j, c in enumerate(f["chunks"]))
        ptr[i + 1] = len(idx)
        if not isinstance(f["op"], str) or f["op"] not in ("reduce", "copy"):
            raise PatternError(f"{w}.op: expected 'reduce' or 'copy', got {f['op']!r}")
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


def loads(text: str) -> CollectivePattern:
    """Parse a JSON string (see :func:`from_dict`)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise PatternError(f"not valid JSON: {e}") from None
    return from_dict(doc)


def save(p: CollectivePattern, path: str | Path) -> None:
    """Write the pattern to ``path`` as JSON."""
    Path(path).write_text(dumps(p))


def load(path: str | Path) -> CollectivePattern:
    """Read a pattern from a JSON file."""
    return loads(Path(path).read_text())

"""Hostile and large pattern files of issue 33, each read in its own process: refused or
accepted, how long, how much memory.

Builds the files in a temporary folder (the 78-byte MSCCL XML that asked for 10^18 cells and
its relatives, repeated JSON keys, over-long integers, megabyte attributes, a FIFO, sparse
step numbers, 10^6 chunks, and two real programs for scale), then reads each the way
``reactccl pattern verify`` does (:func:`reactccl.pattern.files.load_pattern`, then
:func:`reactccl.pattern.verify`) in a fresh ``python`` with a 6 GB address-space limit and a
60 s timeout. Prints per file: the verdict (the first words of the error), seconds inside
the read, seconds of the whole process (interpreter and imports included), and the
process's peak RSS (``resource.getrusage``), then whether the targets hold: every file
within 20 s, the 78-byte XML within 1 s and 200 MB.

Usage: python bench/bench_inputs.py [--only NAME[,NAME...]] [--timeout 60]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reactccl.algorithms import generate  # noqa: E402
from reactccl.pattern import CollectivePattern, dumps, to_dict, to_msccl_xml  # noqa: E402

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from reactccl.pattern import verify
from reactccl.pattern.files import load_pattern
t = time.perf_counter()
try:
    p = load_pattern(sys.argv[1], check=False)
    verify(p)
    verdict = f"accepted: {p.num_ranks} ranks, {p.num_chunks} chunks, {p.num_flows} flows, {p.num_steps} steps"
except Exception as e:
    verdict = f"refused: {type(e).__name__}: {e}"
read = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"verdict": verdict, "read_s": read, "rss_mb": rss}))
"""


def _xml(attrs: str, body: str = "") -> str:
    return f"<algo {attrs}>{body}</algo>\n"


def _chain(cnt: int, steps: int, idle_tbs: int) -> str:
    """GPU 0 sends ``steps`` x ``cnt`` cells to GPU 1 (matched receives), plus idle threadblocks."""
    sends = "".join(f'<step s="{i}" type="s" srcbuf="i" srcoff="0" cnt="{cnt}"/>' for i in range(steps))
    recvs = "".join(f'<step s="{i}" type="r" dstbuf="s" dstoff="0" cnt="{cnt}"/>' for i in range(steps))
    idle = "".join(f'<tb id="{t}" send="-1" recv="-1" chan="0"/>' for t in range(1, idle_tbs + 1))
    return _xml('ngpus="2" nchunksperloop="2" coll="allreduce"',
                f'<gpu id="0" i_chunks="{cnt}"><tb id="0" send="1" recv="-1" chan="0">{sends}</tb>{idle}</gpu>'
                f'<gpu id="1" i_chunks="2" s_chunks="{cnt}"><tb id="0" send="-1" recv="0" chan="0">{recvs}</tb></gpu>')


def _million_chunks() -> str:
    c = 10 ** 6
    p = CollectivePattern.from_arrays("allreduce", 2, np.full(c, 1.0 / c), np.zeros(c, np.int64), [0, 1], [0, 1],
                                      [1, 0], [0, 1], [0, c, 2 * c], np.concatenate([np.arange(c), np.arange(c)]))
    return dumps(p)


def _json_with(**fields) -> str:
    d = to_dict(generate("ring", 4))
    d.update(fields)
    return json.dumps(d)


def cases(folder: Path) -> dict[str, Path]:
    """Write every file; returns ``{name: path}``."""
    ring = dumps(generate("ring", 4))
    sparse = generate("ring", 4)
    texts = {
        "xml-78-bytes": _xml('ngpus="1000000000" nchunksperloop="1000000000" coll="allreduce"'),
        "xml-1000x10000": _xml('ngpus="1000" nchunksperloop="10000" coll="allreduce"'),
        "xml-1e9-gpus-bcast": _xml('ngpus="1000000000" nchunksperloop="1" coll="broadcast" root="0"'),
        "xml-1e8-gpus-reduce": _xml('ngpus="100000000" nchunksperloop="1" coll="reduce" root="0"'),
        "xml-cnt-2e9": _chain(2_000_000_000, 1, 0),
        "xml-20000-tbs": _chain(1, 300, 20_000),
        "xml-tb-id-2^31": _chain(1, 1, 0).replace('<tb id="0" send="1"', '<tb id="2147483647" send="1"', 1),
        "xml-offset-huge": _chain(1, 1, 0).replace('srcoff="0"', 'srcoff="99999999999999999999"', 1),
        "xml-arabic-digit": _xml('ngpus="\u0662" nchunksperloop="2" coll="allreduce"'),
        "xml-plus-digit": _xml('ngpus="+2" nchunksperloop="2" coll="allreduce"'),
        "xml-underscore": _xml('ngpus=" 2_0 " nchunksperloop="2" coll="allreduce"'),
        "xml-5000-digits": _xml(f'ngpus="{"9" * 5000}" nchunksperloop="2" coll="allreduce"'),
        "xml-1MB-attribute": _xml(f'ngpus="2" nchunksperloop="2" coll="{"x" * 1_000_000}"'),
        "xml-ring-64": to_msccl_xml(generate("ring", 64)),
        "json-key-twice": ring.replace('"collective": "allreduce"',
                                       '"collective": "allgather", "collective": "allreduce"', 1),
        "json-5000-digits": _json_with(num_ranks="HUGE").replace('"HUGE"', "7" * 5000),
        "json-1MB-value": _json_with(collective="y" * 1_000_000),
        "json-sparse-steps": json.dumps(to_dict(sparse.replace(step=sparse.step * 2_000_000))),
        "json-1e6-chunks": _million_chunks(),
    }
    out = {}
    for name, text in texts.items():
        f = folder / f"{name}.{'xml' if name.startswith('xml') else 'json'}"
        f.write_text(text)
        out[name] = f
    fifo = folder / "fifo.json"
    os.mkfifo(fifo)
    out["fifo"] = fifo
    return out


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))


def run_one(path: Path, timeout: float) -> dict:
    """Read ``path`` in a fresh process; ``{"verdict", "read_s", "rss_mb", "wall_s"}``."""
    t = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=_limit)
    except subprocess.TimeoutExpired:
        return {"verdict": f"TIMEOUT after {timeout:g} s", "read_s": float("nan"), "rss_mb": float("nan"),
                "wall_s": time.perf_counter() - t}
    wall = time.perf_counter() - t
    try:
        res = json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        res = {"verdict": f"CRASHED (exit {r.returncode}): {r.stderr.strip()[-120:]}", "read_s": float("nan"),
               "rss_mb": float("nan")}
    res["wall_s"] = wall
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = cases(Path(tmp))
        names = args.only.split(",") if args.only else list(files)
        print(f"{'file':22s} {'bytes':>10s} {'read s':>7s} {'proc s':>7s} {'RSS MB':>7s}  verdict")
        worst = 0.0
        ok = True
        for name in names:
            path = files[name]
            size = path.stat().st_size if name != "fifo" else 0
            res = run_one(path, args.timeout)
            verdict = " ".join(res["verdict"].split())
            print(f"{name:22s} {size:10d} {res['read_s']:7.2f} {res['wall_s']:7.2f} {res['rss_mb']:7.0f}  "
                  f"{verdict[:110]}")
            worst = max(worst, res["wall_s"])
            ok &= not verdict.startswith(("TIMEOUT", "CRASHED")) and res["wall_s"] <= 20
            if name == "xml-78-bytes":
                tiny = (res["read_s"], res["rss_mb"])
        print(f"slowest process: {worst:.1f} s (target <= 20 s each: {'met' if ok else 'NOT met'})")
        if "xml-78-bytes" in names:
            met = tiny[0] <= 1 and tiny[1] <= 200
            print(f"78-byte XML: read in {tiny[0]:.3f} s, peak RSS {tiny[1]:.0f} MB of the whole process "
                  f"(target <= 1 s, <= 200 MB: {'met' if met else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

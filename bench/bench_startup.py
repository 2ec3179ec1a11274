"""The first minute, side by side with an earlier revision: start-up of ``reactccl --version``,
``--help`` and ``pattern verify`` of a 16-rank file, and the demo on a cold numba cache.

Each command runs as a whole process (``python -m reactccl ...``), today's tree and ``--before
REV``'s (``git archive`` into a temporary folder) in turn, A B A B ..., so both see the same load;
CPU (user + system of the child, from ``resource``'s children totals) and wall seconds, medians of ``--runs``.
``--cold`` also runs ``demo --json`` once per tree with an empty numba cache (``NUMBA_CACHE_DIR`` set
to a new folder, as on a fresh clone), records the CPU seconds numba spent compiling each family of
kernels (``numba:compile`` events at top level), and checks the two demos print the same result.
The load average is printed before and after: quote CPU seconds on a loaded machine.

Usage: python bench/bench_startup.py [--before main] [--runs 5] [--cold]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Records top-level numba compiles per family of the kernel's module, then runs the CLI.
PROBE = r"""
import json, sys, time
from numba.core import event
fams = {}
class L(event.Listener):
    depth = 0
    def on_start(self, ev):
        self.depth += 1
        if self.depth == 1:
            self.mod = getattr(ev.data["dispatcher"].py_func, "__module__", "?")
            self.t0 = time.process_time()
    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            fam = ".".join(self.mod.split(".")[:2])
            fams[fam] = fams.get(fam, 0.0) + time.process_time() - self.t0
event.register("numba:compile", L())
from reactccl.cli.main import main
try:
    rc = main(sys.argv[1:])
finally:
    print("COMPILE " + json.dumps(fams), file=sys.stderr)
sys.exit(rc)
"""


def run(tree: str, args: list[str], env: dict | None = None, probe: bool = False) -> dict:
    """One whole-process run of the CLI of ``tree``: ``{"wall", "rc", "out", "err"}``; ``probe``: under
    :data:`PROBE` (compile times on stderr)."""
    e = dict(os.environ, PYTHONPATH=tree, **(env or {}))
    cmd = [sys.executable, "-c", PROBE, *args] if probe else [sys.executable, "-m", "reactccl", *args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tree)
    out, err = proc.communicate(timeout=1800)
    wall = time.perf_counter() - t0
    return {"wall": wall, "rc": proc.returncode, "out": out.decode(), "err": err.decode()}


def timed(tree: str, args: list[str], env: dict | None = None, probe: bool = False) -> dict:
    """:func:`run` with the child's CPU seconds (user + system, from ``resource``'s children
    totals before and after)."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run(tree, args, env, probe)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    r["cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r


def export(rev: str, into: str) -> str:
    """The ``reactccl`` package at git revision ``rev`` under ``into`` (importable from there)."""
    tar = os.path.join(into, "old.tar")
    subprocess.run(["git", "archive", "-o", tar, rev, "reactccl"], check=True, cwd=REPO, timeout=60)
    subprocess.run(["tar", "-xf", tar, "-C", into], check=True, timeout=60)
    return into


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="git revision to compare with (default main)")
    ap.add_argument("--runs", type=int, default=5, help="runs of each start-up command per tree (default 5)")
    ap.add_argument("--cold", action="store_true", help="also the demo on an empty numba cache, once per tree")
    a = ap.parse_args()
    print(f"load average before: {load()} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "old"))
        old = export(a.before, os.path.join(tmp, "old"))
        trees = {"today": REPO, a.before: old}
        f16 = os.path.join(tmp, "ring16.json")
        gen = run(REPO, ["pattern", "generate", "ring", "--ranks", "16", "-o", f16])
        assert gen["rc"] == 0, gen["err"]
        cmds = {"--version": ["--version"], "--help": ["--help"],
                "pattern verify (16-rank ring)": ["pattern", "verify", f16]}
        print(f"{'command':32s} " + " ".join(f"{n + ' CPU s':>14s} {n + ' wall s':>15s}" for n in trees)
              + "  CPU ratio")
        for label, args in cmds.items():
            got: dict[str, dict[str, list[float]]] = {n: {"cpu": [], "wall": []} for n in trees}
            for _ in range(a.runs):
                for n, t in trees.items():
                    r = timed(t, args)
                    if r["rc"] != 0:
                        raise SystemExit(f"{n} {label}: exit {r['rc']}: {r['err'][-400:]}")
                    got[n]["cpu"].append(r["cpu"])
                    got[n]["wall"].append(r["wall"])
            med = {n: (statistics.median(v["cpu"]), statistics.median(v["wall"])) for n, v in got.items()}
            ratio = med["today"][0] / med[a.before][0]
            print(f"{label:32s} " + " ".join(f"{c:14.3f} {w:15.3f}" for c, w in med.values()) + f"  {ratio:9.2f}")
        if a.cold:
            print("\ndemo on an empty numba cache (one run per tree):")
            results = {}
            for n, t in trees.items():
                cache = tempfile.mkdtemp(dir=tmp)
                r = timed(t, ["demo", "--json"], {"NUMBA_CACHE_DIR": cache}, probe=True)
                if r["rc"] != 0:
                    raise SystemExit(f"{n} demo: exit {r['rc']}: {r['err'][-400:]}")
                fams = json.loads(r["err"].rsplit("COMPILE ", 1)[1])
                doc = json.loads(r["out"])
                doc.pop("wall_s", None)
                results[n] = doc
                comp = ", ".join(f"{k} {v:.1f}" for k, v in sorted(fams.items(), key=lambda kv: -kv[1]))
                print(f"  {n:8s} CPU {r['cpu']:6.1f} s, wall {r['wall']:6.1f} s; compiling (CPU s): "
                      f"{sum(fams.values()):.1f} = {comp}")
            same = results["today"] == results[a.before]
            print(f"  same demo result (JSON without wall_s): {'yes' if same else 'NO'}")
    print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Random simulation cases for comparing the fluid engines (the property test and ``bench/bench_engines_agree.py``).

:func:`random_case` draws the arguments of one epoch of :func:`reactccl.netsim.run.run_simulation`:
a fabric (fat-tree, leaf-spine, Alibaba-style, torus), 8-128 ranks at a random placement, a
collective, a message size, ECMP ports, the execution order, and sometimes long-lived background
flows, a periodic bulk source and degraded cables. :func:`capture` records what the reference
engine is given for it (a :class:`maxmin_oracle.Case`); :func:`allocation_errors` replays a case on
either engine and checks its rates against the from-scratch oracle at chosen points of the run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from maxmin_oracle import Case, case_of, progressive_filling

from reactccl.netsim import CompiledEngine, FluidEngine, SimulationError, network, run_simulation

# (spec, hosts, square 2-D torus): the fabrics drawn from
FABRICS = [
    ("fat-tree:k=4", 16, False), ("fat-tree:k=8", 128, False),
    ("leaf-spine:leaves=4,spines=2,hosts=4", 16, False), ("leaf-spine:leaves=8,spines=4,hosts=8", 64, False),
    ("alibaba:tors=8,aggs=3,hosts=8", 64, False), ("alibaba:tors=16,aggs=3,hosts=8", 128, False),
    ("torus:4x4", 16, True), ("torus:4x4x4", 64, False), ("torus:8x8", 64, True), ("torus:8x16", 128, False),
]
GENERIC = ["ring", "nccl-tree", "rabenseifner", "rd-allreduce", "ring-allgather", "recursive-doubling",
           "binomial-broadcast", "ring-reducescatter"]
TORUS_ONLY = ["torus-ring", "bucket", "swing-b", "sp-allreduce"]  # on every node of a square torus, in order


def random_case(seed: int, max_ranks: int = 128) -> dict[str, Any]:
    """Keyword arguments of :func:`run_simulation` for one random epoch (``epochs=1``); deterministic in
    ``seed``. Ranks are 8..``max_ranks`` (and at most the fabric's hosts) at a random placement, or a
    torus algorithm on every node of a square torus in node order."""
    rng = np.random.default_rng([seed, 33])
    fabrics = [f for f in FABRICS if min(f[1], max_ranks) >= 8]
    spec, hosts, torus = fabrics[int(rng.integers(len(fabrics)))]
    top = min(hosts, max_ranks)
    full = torus and top == hosts and rng.random() < 0.4
    ranks = hosts if full else int(rng.integers(8, top + 1))
    algorithm = str(rng.choice(TORUS_ONLY if full else GENERIC))
    size = float(np.round(10 ** rng.uniform(5, 7.3)))
    kw: dict[str, Any] = {"algorithm": algorithm, "ranks": ranks, "topology": spec, "size": size, "epochs": 1,
                          "placement": "first" if full else "random", "seed": int(rng.integers(1 << 30)),
                          "ports": int(rng.integers(1, 5)), "order": str(rng.choice(["step", "data"]))}
    background: list[str] = []
    if ranks < hosts and rng.random() < 0.5:
        background.append(str(rng.choice(["pairs:x=2:p=1", "into:0:p=2", "out:1:p=1"])))
    if rng.random() < 0.25:
        background.append("bulk:src=r0,dst=r1,bytes=50KB,period=100us")    # 4 Gbps offered
    kw["background"] = background
    if rng.random() < 0.5:
        kw["degrade"] = [str(rng.choice(["random:k=2:rate=30G", "job:k=1:rate=40G", "random:k=4:rate=10G"]))]
    return kw


def describe(kw: dict[str, Any]) -> str:
    """One line naming a case."""
    extra = " ".join([f"-b {b}" for b in kw.get("background", [])] + [f"-d {d}" for d in kw.get("degrade", [])])
    return (f"{kw['algorithm']} -n {kw['ranks']} -t {kw['topology']} -s {kw['size']:.0f} --seed {kw['seed']} "
            f"--ecmp-ports {kw['ports']} --order {kw['order']} {extra}").strip()


@contextlib.contextmanager
def _recording(into: list[Case]) -> Iterator[None]:
    """Within the block, the ``python`` engine records its inputs when it starts running."""
    class Recorder(FluidEngine):
        def run(self) -> float:
            into.append(case_of(self))
            return super().run()

    saved = network.ENGINES["python"]
    network.ENGINES["python"] = Recorder
    try:
        yield
    finally:
        network.ENGINES["python"] = saved


def capture(kw: dict[str, Any]) -> Case:
    """The inputs the reference engine gets for the case ``kw`` (its one epoch)."""
    got: list[Case] = []
    with _recording(got):
        run_simulation(**{**kw, "engine": "python"})
    return got[0]


def run_both(kw: dict[str, Any]):
    """The case's epoch trace from the reference and from the compiled engine."""
    return [run_simulation(**{**kw, "engine": e}, keep_traces=True).traces[0] for e in ("python", "compiled")]


def _check(paths: Sequence[Sequence[int]], capacity: np.ndarray, rates: Sequence[float]) -> float:
    if not len(paths):
        return 0.0
    want = np.array(progressive_filling(paths, capacity.tolist()))
    return float(np.max(np.abs(np.asarray(rates, dtype=np.float64) - want) / want))


def _active(eng) -> np.ndarray:
    start, send_end = np.asarray(eng.start, dtype=np.float64), np.asarray(eng.send_end, dtype=np.float64)
    return np.flatnonzero(~np.isnan(start) & np.isnan(send_end))


def allocation_errors(case: Case, engine: str, at: Sequence[int]) -> list[float]:
    """For each ``n`` in ``at``: run ``case`` on ``engine`` ("python" or "compiled") until the batch in
    which its event count first passes ``n`` has been handled, and give the largest relative
    difference between the engine's rates of the flows sending then and the oracle's
    :func:`progressive_filling` of those flows (``nan`` if the run ends before)."""
    out = []
    for n in at:
        eng = case.build(CompiledEngine if engine == "compiled" else FluidEngine, max_events=int(n))
        try:
            eng.run()
            out.append(float("nan"))
            continue
        except SimulationError as exc:
            if "max_events" not in str(exc):
                raise
        act = _active(eng)
        if engine == "compiled":
            paths = [eng.path_links[eng.path_start[f]:eng.path_start[f] + eng.path_len[f]].tolist() for f in act]
        else:
            paths = [eng.paths[f] for f in act]
        out.append(_check(paths, case.capacity, [eng.rate[f] for f in act]))
    return out


PROBE = 1e-13       # relative size of the capacity perturbation that measures a case's conditioning
ILL = 1e-8          # a case whose flow ends move more than this under PROBE is ill-conditioned at 1e-9


def conditioning(case: Case, seed: int = 0) -> float:
    """How far the reference engine's flow ends move (largest relative change) when every link capacity
    is scaled by its own ``1 + u * PROBE``, ``u`` uniform in [-1, 1]: the amplification of round-off that
    the case itself causes, with no second engine involved. The engines' arithmetic differs in the
    last bits, and on 500 random cases their end times differed by at most 0.017 x this probe where
    it was under 1e-3; so a case under :data:`ILL` must agree to 1e-9 (with a margin of 6)."""
    base = case.build(FluidEngine)
    base.run()
    rng = np.random.default_rng([seed, 13])
    moved = Case(**{**case.__dict__, "capacity": case.capacity * (1 + PROBE * rng.uniform(-1, 1, len(case.capacity)))})
    eng = moved.build(FluidEngine)
    eng.run()
    w = np.flatnonzero(case.watched)
    a, b = np.asarray(base.end, dtype=np.float64)[w], np.asarray(eng.end, dtype=np.float64)[w]
    return float(np.max(np.abs(a - b) / a)) if len(w) else 0.0


def compare(kw: dict[str, Any], samples: int = 3) -> dict[str, Any]:
    """Run case ``kw`` on both engines and check it: ``diff`` (largest relative difference of the
    flows' end times), ``events`` (both counts), ``alloc`` (worst relative difference of each engine's
    rates from the oracle at ``samples`` points spread over its run), ``probe`` (:func:`conditioning`),
    each engine's CPU seconds for the epoch (``cpu``), and ``replay``: both engines give the same
    end times, bit for bit, when fed the recorded inputs through ``add_*`` (so the oracle checks
    follow the very runs compared)."""
    import time
    traces, cpu = [], {}
    for e in ("python", "compiled"):
        t0 = time.process_time()
        traces.append(run_simulation(**{**kw, "engine": e}, keep_traces=True).traces[0])
        cpu[e] = time.process_time() - t0
    tp, tc = traces
    diff = float(np.max(np.abs(tp.end - tc.end) / tp.end)) if len(tp.end) else 0.0
    case = capture(kw)
    n = int(tp.meta["events"])
    at = sorted({max(1, n * (k + 1) // (samples + 1)) for k in range(samples)})
    alloc = {e: max(allocation_errors(case, e, at)) for e in ("python", "compiled")}
    replay = []                       # the recorded inputs give both engines the same run again
    for E, tr in ((FluidEngine, tp), (CompiledEngine, tc)):
        eng = case.build(E)
        eng.run()
        replay.append(bool(np.array_equal(np.asarray(eng.end[:len(tr.end)], dtype=np.float64), tr.end)))
    return {"diff": diff, "replay": all(replay), "events": (int(tp.meta["events"]), int(tc.meta["events"])),
            "alloc": alloc, "probe": conditioning(case, kw["seed"]), "cpu": cpu, "flows": len(tp.end)}

"""An nccl-tests-style sweep: one collective over a range of sizes, timed, with algbw and busbw.

Sizes go from ``min_bytes`` to ``max_bytes`` multiplying by ``factor`` (nccl-tests' ``-b -e -f``;
``K``/``M``/``G`` are binary there, so ``128M`` = 128 MiB). Each size runs ``warmup`` untimed and
``iters`` timed iterations; the time is the mean per iteration (over ranks on real ranks, as
nccl-tests averages). algbw = size / time; busbw = algbw x nccl-tests' factor
(:func:`reactccl.trace.busbw_factor`: 2(n-1)/n for AllReduce, (n-1)/n for AllGather and
ReduceScatter, 1 for Broadcast and Reduce; nccl-tests ``doc/PERFORMANCE.md``).

Two executors:

- :func:`sim_sweep` runs the patterns on the simulator (epochs = warm-ups + iterations; the
  time is the mean of the timed epochs). No data moves, so ``#wrong`` is ``None`` (printed
  ``N/A``, as nccl-tests prints it without ``-c``); the patterns are verified instead.
- :func:`dist_sweep` runs on real ranks (torch.distributed, Gloo or NCCL), with
  ``dist.all_reduce`` beside our patterns. After timing, every rank fills a buffer with
  rank-dependent integers, runs the collective once more and counts elements that differ from
  the exact sum: ``#wrong`` (summed over ranks), as nccl-tests' check does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..trace import busbw_factor

__all__ = ["PerfRow", "DTYPES", "REAL_DTYPES", "parse_nccl_size", "nccl_sizes", "check_dtype", "sim_sweep",
           "dist_sweep", "measure", "format_table", "plot_busbw"]

#: nccl-tests' type names -> bytes per element.
DTYPES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
          "double": 8, "bfloat16": 2}
#: The types real ranks run (torch.distributed has no sum of uint32/uint64 tensors on every backend).
REAL_DTYPES = ("float", "double", "half", "bfloat16", "int8", "uint8", "int32", "int64")


def check_dtype(dtype: str, min_bytes: int, real: bool = False) -> None:
    """Refuse ``dtype`` for a sweep from ``min_bytes`` up. Sizes count whole elements, as
    nccl-tests' ``count = size / wordSize(type)``, so the smallest size must hold one.

    Raises:
        ValueError: an unknown type, one real ranks do not run (``real=True``; see
            :data:`REAL_DTYPES`), or ``min_bytes`` below one element (named ``-b/--minbytes``).
    """
    if dtype not in DTYPES or (real and dtype not in REAL_DTYPES):
        known = REAL_DTYPES if real else tuple(DTYPES)
        raise ValueError(f"-d {dtype}: not supported{' on real ranks' if real else ''} (use one of "
                         f"{', '.join(known)})")
    if min_bytes < DTYPES[dtype]:
        raise ValueError(f"-b/--minbytes {min_bytes}: smaller than one {dtype} element ({DTYPES[dtype]} bytes); "
                         "sizes count whole elements, as in nccl-tests")


@dataclass
class PerfRow:
    """One line of the sweep: what nccl-tests prints, in SI units.

    Attributes:
        size: message bytes; count: elements; time_s: mean seconds per iteration;
        algbw, busbw: bytes/s; wrong: wrong elements (None when not checked).
    """

    algorithm: str
    collective: str
    ranks: int
    size: int
    count: int
    type: str
    redop: str
    root: int
    time_s: float
    algbw: float
    busbw: float
    wrong: int | None

    def to_dict(self) -> dict:
        """JSON-ready (bandwidths in bytes/s, time in seconds)."""
        return asdict(self)


def parse_nccl_size(text: str | int, what: str = "size") -> int:
    """``"8"``, ``"1K"``, ``"128M"``, ``"1G"`` (binary, as nccl-tests' ``-b``/``-e``), or a size
    with a unit such as ``"20MB"``/``"64MiB"`` (:func:`reactccl.topology.parse_size`). ``what``
    names the field in errors (e.g. ``"-b/--minbytes"``).

    Raises:
        ValueError: not a size, or negative.
    """
    if isinstance(text, int):
        return text
    t = str(text).strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if t[-1:].upper() in mult and t[:-1].strip().isdigit():
        return int(t[:-1]) * mult[t[-1].upper()]
    if t.isdigit():
        return int(t)
    from ..topology import parse_size
    v = parse_size(t, what)
    if v < 0 or v != int(v):
        raise ValueError(f"{what} {text!r}: expected a whole number of bytes")
    return int(v)


MAX_SIZES = 10_000   # sizes one sweep may visit


def nccl_sizes(min_bytes: int, max_bytes: int, factor: float = 2.0, step: int | None = None) -> list[int]:
    """The sizes nccl-tests visits: ``min, min*factor, ...`` up to ``max`` (or ``+step``).

    Raises:
        ValueError: min > max, min < 1, a factor <= 1 without a step, or more than
            :data:`MAX_SIZES` sizes (named with the step that would fit).
    """
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ValueError(f"-b {min_bytes} / -e {max_bytes}: need 1 <= minbytes <= maxbytes")
    if step is None and not factor > 1:
        raise ValueError(f"-f {factor}: the step factor must be > 1 (or give -i STEPBYTES)")
    if step is not None and step < 1:
        raise ValueError(f"-i {step}: step bytes must be >= 1")
    out, s = [], min_bytes
    while s <= max_bytes:
        if len(out) == MAX_SIZES:
            hint = (f"-i {-(-(max_bytes - min_bytes) // (MAX_SIZES - 1))} or more" if step is not None
                    else "a larger -f")
            raise ValueError(f"-b {min_bytes} -e {max_bytes}: more than {MAX_SIZES:,} sizes; use {hint}")
        out.append(int(s))
        s = s + step if step is not None else int(s * factor)
    return out


def _row(algorithm, collective, ranks, size, dtype, root, t, wrong) -> PerfRow:
    algbw = size / t if t > 0 else float("nan")
    return PerfRow(algorithm, collective, ranks, size, size // DTYPES[dtype], dtype, "sum",
                   -1 if root is None else root, t, algbw, algbw * busbw_factor(collective, ranks), wrong)


def sim_sweep(algorithms: Sequence[str], ranks: int, sizes: Sequence[int], iters: int = 20, warmup: int = 5,
              dtype: str = "float", topology: str = "fat-tree:k=4", options: dict | None = None,
              progress: Callable[[str, int], None] | None = None, **sim) -> list[PerfRow]:
    """Each algorithm at each size on the simulator (see the module docstring).

    Args:
        sim: passed to :func:`reactccl.netsim.run_simulation` (``seed``, ``background``,
            ``degrade``, ``ports``, ``placement``, and ``engine`` where the simulator has one).

    Each size is rounded down to whole ``dtype`` elements (nccl-tests' count x element size).

    Raises:
        ValueError: a dtype or smallest size that :func:`check_dtype` refuses.
        PatternError, TopologyError, ...: from generating or simulating, named.
    """
    from ..algorithms import generate
    from ..netsim import run_simulation
    check_dtype(dtype, min(sizes, default=DTYPES.get(dtype, 1)))
    rows = []
    for algo in algorithms:
        p = generate(algo, ranks, **dict(options or {}))   # verified
        for size in sizes:
            size = size // DTYPES[dtype] * DTYPES[dtype]   # whole elements, as nccl-tests' count
            res = run_simulation(p, topology=topology, size=float(size), epochs=warmup + iters, slowest=0, **sim)
            t = float(np.mean(res.durations[warmup:])) if p.num_flows else 0.0
            rows.append(_row(algo, p.collective.value, ranks, size, dtype, p.root, t, None))
            if progress is not None:
                progress(algo, size)
    return rows


def _check_data(count: int, rank: int, dtype, device):
    import torch
    i = torch.arange(count, device=device) % 7 + 1
    return (i * (rank + 1)).to(dtype)


def measure(op: Callable, count: int, dtype, device, iters: int, warmup: int, group=None,
            sync: Callable[[], None] | None = None, check: bool = True) -> tuple[float, int | None]:
    """Time ``op(tensor)`` (an in-place sum AllReduce) on this rank and check it, as nccl-tests does.

    Returns:
        ``(mean seconds per iteration averaged over ranks, wrong elements summed over ranks)``.
        The check fills element i on rank r with ``(r + 1) * (i % 7 + 1)``, runs ``op`` once and
        counts elements that differ from ``(i % 7 + 1) * n(n+1)/2`` exactly (``None`` with
        ``check=False``).
    """
    import torch
    import torch.distributed as dist
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    sync = sync or (lambda: None)
    buf = torch.zeros(count, dtype=dtype, device=device)
    for _ in range(warmup):
        op(buf)
    sync()
    dist.barrier(group)
    t0 = time.perf_counter()
    for _ in range(iters):
        op(buf)
    sync()
    elapsed = (time.perf_counter() - t0) / max(iters, 1)
    wrong = 0
    if check:
        x = _check_data(count, rank, dtype, device)
        op(x)
        sync()
        expect = ((torch.arange(count, device=device) % 7 + 1) * (n * (n + 1) // 2)).to(dtype)
        wrong = int((x != expect).sum().item())
    stats = torch.tensor([elapsed, float(wrong)], dtype=torch.float64, device=device)
    dist.all_reduce(stats, group=group)
    return float(stats[0].item()) / n, (int(round(stats[1].item())) if check else None)


def dist_sweep(algorithms: Sequence[str], sizes: Sequence[int], iters: int = 20, warmup: int = 5,
               dtype: str = "float", options: dict | None = None, include_dist: bool = True, group=None,
               timeout: float = 60.0, check: bool = True) -> list[PerfRow]:
    """Each algorithm (and ``dist.all_reduce``) at each size on the real ranks of ``group``.

    Call on every rank (after ``init_process_group``); every rank gets the same rows. Only
    AllReduce patterns run here (the check is the AllReduce sum).

    Raises:
        ValueError: an algorithm that is not an AllReduce, or a dtype or smallest size that
            :func:`check_dtype` refuses (``real=True``).
    """
    import torch
    import torch.distributed as dist

    from ..algorithms import generate
    from ..runtime.rcollective import RCollective
    check_dtype(dtype, min(sizes, default=DTYPES.get(dtype, 1)), real=True)
    tdtype = {"int8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
              "half": torch.float16, "float": torch.float32, "double": torch.float64,
              "bfloat16": torch.bfloat16}[dtype]
    n = dist.get_world_size(group)
    backend = dist.get_backend(group)
    if backend == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
        sync = torch.cuda.synchronize
    else:
        device, sync = torch.device("cpu"), None
    ops: list[tuple[str, str, Callable]] = []
    made = []
    for algo in algorithms:
        p = generate(algo, n, **dict(options or {}))
        if p.collective.value != "allreduce":
            raise ValueError(f"-a {algo}: computes {p.collective.value}; on real ranks perf runs AllReduce patterns")
        rc = RCollective(p, group, timeout=timeout, check="never")
        made.append(rc)
        ops.append((algo, "allreduce", lambda t, rc=rc: rc(t)))
    if include_dist:
        ops.append(("dist.all_reduce", "allreduce", lambda t: dist.all_reduce(t, group=group)))
    rows = []
    size_of = DTYPES[dtype]
    try:
        for name, coll, op in ops:
            for size in sizes:
                count = size // size_of
                if count < 1:
                    continue
                t, wrong = measure(op, count, tdtype, device, iters, warmup, group=group, sync=sync, check=check)
                rows.append(_row(name, coll, n, count * size_of, dtype, None, t, wrong))
    finally:
        for rc in made:
            rc.close()
    return rows


def format_table(rows: Sequence[PerfRow], header: str = "") -> str:
    """The rows as nccl-tests prints them (in place), one block per algorithm, then the average busbw."""
    out = []
    if header:
        out.append(f"# {header}")
    algos = list(dict.fromkeys(r.algorithm for r in rows))
    for algo in algos:
        rs = [r for r in rows if r.algorithm == algo]
        out += ["#", f"# algorithm: {algo} ({rs[0].collective}, {rs[0].ranks} ranks)",
                "#" + " " * 62 + "in-place",
                "#       size         count      type   redop    root     time   algbw   busbw #wrong",
                "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "]
        for r in rs:
            wrong = "N/A" if r.wrong is None else str(r.wrong)
            out.append(f"{r.size:12d}  {r.count:12d}  {r.type:>8s}  {r.redop:>6s}  {r.root:6d}  "
                       f"{r.time_s * 1e6:7.2f}  {r.algbw / 1e9:6.2f}  {r.busbw / 1e9:6.2f}  {wrong:>5s}")
        checked = [r.wrong for r in rs if r.wrong is not None]
        if checked:
            bad = sum(checked)
            out.append(f"# Out of bounds values : {bad} {'OK' if bad == 0 else 'FAILED'}")
        out.append(f"# Avg bus bandwidth    : {np.mean([r.busbw for r in rs]) / 1e9:.6g}")
    return "\n".join(out) + "\n"


def _binary(size: int) -> str:
    """Bytes as nccl-tests users write them: 8 B, 4 KiB, 128 MiB (binary units, up to 3 digits)."""
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << k:
            return f"{size / (1 << k):.3g} {unit}"
    return f"{size} B"


def plot_busbw(rows: Sequence[PerfRow], path: str | Path, title: str = "") -> Path:
    """busbw (GB/s) against message size (log scale), one line per algorithm; returns ``path``."""
    import matplotlib  # noqa: PLC0415
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for algo in dict.fromkeys(r.algorithm for r in rows):
        rs = [r for r in rows if r.algorithm == algo]
        ax.plot([r.size for r in rs], [r.busbw / 1e9 for r in rs], marker="o", markersize=3, label=algo)
    ax.set_xscale("log", base=2)
    sizes = sorted({r.size for r in rows})
    ticks = sizes[::max(1, len(sizes) // 10)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([_binary(s) for s in ticks], rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("message size")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path

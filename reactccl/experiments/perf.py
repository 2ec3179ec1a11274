"""An nccl-tests-style sweep: one collective over a range of sizes, timed out of place and in place,
with algbw and busbw.

Sizes go from ``min_bytes`` to ``max_bytes`` multiplying by ``factor`` or adding ``step``
(nccl-tests' ``-b -e -f -i``; ``K``/``M``/``G`` are binary there, so ``128M`` = 128 MiB). A size
counts whole elements of the type, and for AllGather, ReduceScatter and AllToAll each rank's
part is rounded down to a multiple of 16 bytes (nccl-tests' ``getCollByteCount``), so the size
printed is ``N x`` that part; the count column is the elements per rank for those three (their
``paramcount``) and the whole count for the others. Each size runs ``warmup`` untimed and
``iters`` timed iterations out of place, then in place, as nccl-tests does. algbw = size / time;
busbw = algbw x nccl-tests' factor (:func:`reactccl.trace.busbw_factor`: 2(n-1)/n AllReduce,
(n-1)/n AllGather, ReduceScatter and AllToAll, 1 Broadcast and Reduce; nccl-tests
``doc/PERFORMANCE.md``). ``average`` combines the ranks' times as nccl-tests' ``-a``: 0 rank 0's,
1 the mean (default), 2 the least, 3 the most.

Two executors:

- :func:`sim_sweep` runs the patterns on the simulator. An iteration is one epoch, run alone (as
  nccl-tests' ``-z 3``: wait and barrier after every iteration, the barrier not timed); a rank's
  time is the end of its last flow (sent or received) in the epoch, averaged over the timed
  epochs. No data moves and out of place and in place run the same flows, so both columns
  agree and ``#wrong`` is ``None`` (printed ``N/A``, as nccl-tests prints it without ``-c``);
  every pattern is verified exactly instead (:func:`reactccl.pattern.verify`).
- :func:`~reactccl.experiments.perf_real.dist_sweep` runs on real ranks (torch.distributed, Gloo
  or NCCL), with the torch.distributed collective beside our patterns and an element-by-element
  check (``#wrong``, summed over ranks, as nccl-tests' check).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..pattern import Collective, CollectivePattern
from ..suggest import did_you_mean
from ..trace import busbw_factor

if TYPE_CHECKING:
    from ..topology import Topology

__all__ = ["PerfRow", "DTYPES", "REAL_DTYPES", "COLLECTIVES", "DEFAULT_ALGORITHMS", "MAX_SIZES", "collective_of",
           "parse_nccl_size", "nccl_sizes", "nccl_count", "check_dtype", "combine_times", "make_row", "sim_sweep",
           "dist_sweep", "measure", "format_table"]

#: nccl-tests' type names -> bytes per element.
DTYPES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
          "double": 8, "bfloat16": 2}
#: The types real ranks run (torch.distributed has no sum of uint32/uint64 tensors on every backend).
REAL_DTYPES = ("float", "double", "half", "bfloat16", "int8", "uint8", "int32", "int64")
#: nccl-tests' test names (``all_reduce_perf`` ...) -> the IR's collective.
COLLECTIVES = {"all_reduce": Collective.ALLREDUCE, "all_gather": Collective.ALLGATHER,
               "reduce_scatter": Collective.REDUCESCATTER, "broadcast": Collective.BROADCAST,
               "reduce": Collective.REDUCE, "alltoall": Collective.ALLTOALL}
#: What ``perf`` runs for each collective when no ``--algorithm`` is given.
DEFAULT_ALGORITHMS = {Collective.ALLREDUCE: ("ring", "nccl-tree"), Collective.ALLGATHER: ("ring-allgather",),
                      Collective.REDUCESCATTER: ("ring-reducescatter",),
                      Collective.BROADCAST: ("binomial-broadcast",), Collective.REDUCE: ("binomial-reduce",),
                      Collective.ALLTOALL: ("alltoall-pairwise", "alltoall-bruck")}
#: ``-a`` modes, nccl-tests' ``average``.
AVERAGE_MODES = {0: "rank 0", 1: "mean over ranks", 2: "least over ranks", 3: "most over ranks"}


def collective_of(name: str) -> Collective:
    """The collective for an nccl-tests test name (``all_reduce``, ``all_gather``, ``reduce_scatter``,
    ``broadcast``, ``reduce``, ``alltoall``; ``_perf`` may follow) or an IR name (``allreduce`` ...).

    Raises:
        ValueError: another name, listing the accepted ones.
    """
    key = str(name).strip().lower().removesuffix("_perf").replace("-", "_")
    if key in COLLECTIVES:
        return COLLECTIVES[key]
    key = key.replace("_", "")
    for c in Collective:
        if c.value == key:
            return c
    raise ValueError(f"--collective {name}{did_you_mean(str(name), COLLECTIVES)}: expected one of "
                     f"{', '.join(COLLECTIVES)}")


def nccl_name(collective: Collective | str) -> str:
    """nccl-tests' name of a collective (``all_reduce`` ...)."""
    c = Collective(collective)
    return next(k for k, v in COLLECTIVES.items() if v is c)


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


def nccl_count(collective: Collective | str, size: int, dtype: str, ranks: int) -> tuple[int, int]:
    """``(bytes, count)`` nccl-tests runs and prints for a requested ``size``: whole elements; for
    AllGather, ReduceScatter and AllToAll each rank's part rounded down to 16 bytes (``base``
    elements), the size being ``ranks * base`` elements and the count ``base``."""
    word = DTYPES[dtype]
    count = int(size) // word
    if Collective(collective).is_blocked:
        base = (count // ranks) & ~(max(1, 16 // word) - 1)
        return ranks * base * word, base
    return count * word, count


@dataclass
class PerfRow:
    """One line of the sweep: what nccl-tests prints, in SI units (JSON schema ``reactccl.perf/2``).

    Attributes:
        algorithm: the generator (or ``dist.<op>`` for torch.distributed's own collective);
        collective: the IR's name (``allreduce`` ...); ranks: N;
        size: bytes (nccl-tests' size column); count: elements (per rank for AllGather,
            ReduceScatter and AllToAll, as nccl-tests); type, redop (``sum`` or ``none``), root (-1
            where none);
        time_s, algbw, busbw, wrong: in place (the names of schema ``reactccl.perf/1``, whose only
            columns were in place): mean seconds per iteration, bytes/s, bytes/s, wrong elements
            (None when not checked);
        oop_time_s, oop_algbw, oop_busbw, oop_wrong: the same out of place;
        pattern: the pattern's name as generated for this size (e.g. ``nccl-tree(slices=128)``),
            chunks, graphs: its chunk and chunk-graph counts ("" and 0 for ``dist.*``).
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
    oop_time_s: float
    oop_algbw: float
    oop_busbw: float
    oop_wrong: int | None
    pattern: str = ""
    chunks: int = 0
    graphs: int = 0

    def to_dict(self) -> dict:
        """JSON-ready (bandwidths in bytes/s, times in seconds)."""
        return asdict(self)


def make_row(algorithm: str, collective: Collective | str, ranks: int, size: int, count: int, dtype: str,
             root: int | None, oop: tuple[float, int | None], inplace: tuple[float, int | None],
             pattern=None) -> PerfRow:
    """A :class:`PerfRow` from ``(seconds, wrong)`` out of place and in place; algbw = size / time,
    busbw = algbw x :func:`reactccl.trace.busbw_factor`."""
    c = Collective(collective)
    f = busbw_factor(c, ranks)

    def bw(t: float) -> float:
        return size / t if t > 0 else float("nan")

    return PerfRow(algorithm, c.value, ranks, size, count, dtype, "sum" if c.reduces else "none",
                   -1 if root is None else int(root), inplace[0], bw(inplace[0]), bw(inplace[0]) * f, inplace[1],
                   oop[0], bw(oop[0]), bw(oop[0]) * f, oop[1],
                   "" if pattern is None else (pattern.name or algorithm),
                   0 if pattern is None else pattern.num_chunks,
                   0 if pattern is None else len(np.unique(pattern.chunk_graph)))


def parse_nccl_size(text: str | int, what: str = "size") -> int:
    """``"8"``, ``"1K"``, ``"128M"``, ``"1G"`` (binary, as nccl-tests' ``-b``/``-e``), a size in
    explicit binary units (``"64MiB"``) or bytes (``"100B"``). ``what`` names the field in errors
    (e.g. ``"-b/--minbytes"``).

    A decimal unit (``"20MB"``, ``"20 kB"``) is refused, not read: everywhere else in reactccl 20MB
    is 20e6 bytes, but perf's sizes are binary as nccl-tests' (``-b 20M`` is 20 MiB), and a
    ``-b "20 MB"`` that silently meant 20,000,000 would sweep sizes 5% off nccl-tests' rows.

    Raises:
        ValueError: not a size, negative, or in a decimal unit (the message gives both readings).
    """
    if isinstance(text, int):
        return text
    t = str(text).strip()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if t[-1:].upper() in mult and t[:-1].strip().isdigit():
        return int(t[:-1]) * mult[t[-1].upper()]
    if t.isdigit():
        return int(t)
    unit = t.lstrip("0123456789.eE+- ")
    if unit[:1].upper() in mult and unit[1:].upper() == "B" and unit[1:] == "B":
        num, p = t[: len(t) - len(unit)].strip(), unit[0].upper()
        k = "KMGT".index(p) + 1
        try:
            dec = f"{float(num) * 10 ** (3 * k):.0f}"
            binary = f" = {float(num) * 2 ** (10 * k):,.0f} bytes"
        except ValueError:
            dec, binary = "the bytes", ""
        raise ValueError(f"{what} {text!r}: a decimal unit, but perf's sizes are binary as nccl-tests' "
                         f"({num}{p} = {num} x 2^{10 * k}{binary}); write {num}{p} or {num}{p}iB for that, or {dec} "
                         f"for {num} {unit}")
    from ..topology import parse_size
    v = parse_size(t, what)
    if v < 0 or v != int(v):
        raise ValueError(f"{what} {text!r}: expected a whole number of bytes")
    return int(v)


MAX_SIZES = 10_000   # sizes one sweep may visit


def nccl_sizes(min_bytes: int, max_bytes: int, factor: float | None = None, step: int | None = None) -> list[int]:
    """The sizes nccl-tests visits: ``min, min*factor, ...`` up to ``max`` when ``factor > 1``, else
    ``min, min+step, ...`` (nccl-tests: the factor wins when both are given).

    Raises:
        ValueError: min > max, min < 1, neither a factor > 1 nor a step, a step < 1, or more than
            :data:`MAX_SIZES` sizes (named with the step that would fit).
    """
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ValueError(f"-b {min_bytes} / -e {max_bytes}: need 1 <= minbytes <= maxbytes")
    if factor is not None and factor > 1:
        def advance(x: int) -> int:
            return int(x * factor)
        hint = "a larger -f"
    elif step is None:
        raise ValueError(f"-f {factor}: the step factor must be > 1 (or give -i STEPBYTES)")
    elif step < 1:
        raise ValueError(f"-i {step}: step bytes must be >= 1")
    else:
        def advance(x: int) -> int:
            return x + step
        hint = f"-i {-(-(max_bytes - min_bytes) // (MAX_SIZES - 1))} or more"
    out: list[int] = []
    s = min_bytes
    while s <= max_bytes:
        if len(out) == MAX_SIZES:
            raise ValueError(f"-b {min_bytes} -e {max_bytes}: more than {MAX_SIZES:,} sizes; use {hint}")
        out.append(int(s))
        s = advance(s)
    return out


def combine_times(times: Sequence[float] | np.ndarray, average: int = 1) -> float:
    """The ranks' times (s) as nccl-tests' ``-a`` reports them: 0 rank 0's, 1 the mean, 2 the least,
    3 the most.

    Raises:
        ValueError: another mode.
    """
    t = np.asarray(times, dtype=np.float64)
    if average not in AVERAGE_MODES:
        raise ValueError(f"-a {average}: expected 0 (rank 0), 1 (mean), 2 (min) or 3 (max)")
    return float(t[0] if average == 0 else t.mean() if average == 1 else t.min() if average == 2 else t.max())


def rank_finish(trace) -> np.ndarray:
    """Each rank's end of its last flow, sent or received, in one epoch's trace, shape ``(N,)`` (s)."""
    p = trace.pattern
    fin = np.zeros(p.num_ranks)
    np.maximum.at(fin, p.src, trace.end)
    np.maximum.at(fin, p.dst, trace.end)
    return fin


def sim_sweep(algorithms: Sequence[str], ranks: int, sizes: Sequence[int], iters: int = 20, warmup: int = 1,
              dtype: str = "float", topology: str | Topology = "fat-tree:k=4", options: dict | None = None,
              progress: Callable[[str, int], None] | None = None, root: int = 0, average: int = 1,
              **sim) -> list[PerfRow]:
    """Each algorithm at each size on the simulator (see the module docstring).

    Args:
        algorithms: registered generators, all of one collective.
        topology: a spec or a :class:`~reactccl.topology.Topology`, built once for the sweep. On
            a topology of servers ``ring`` and ``nccl-tree`` are NCCL's hierarchical patterns
            (server options filled where ``options`` do not set them,
            :func:`reactccl.algorithms.server_options.server_options`).
        root: the root of Broadcast/Reduce generators (their ``root`` option).
        average: nccl-tests' ``-a`` (:func:`combine_times`) over the ranks' times.
        sim: passed to :func:`reactccl.netsim.run_simulation` (``seed``, ``background``,
            ``degrade``, ``ports``, ``placement``, and ``engine`` where the simulator has one).

    The pattern is generated for each size (``generate(..., size=)``: ``nccl-tree`` slices by
    NCCL's chunk rule unless ``options`` set ``slices``) and reused while it stays the same.
    Sizes nccl-tests would run with no element per rank (:func:`nccl_count` gives 0) are left out.

    Raises:
        ValueError: a dtype or smallest size that :func:`check_dtype` refuses; algorithms of
            different collectives.
        PatternError, TopologyError, ...: from generating or simulating, named.
    """
    from ..algorithms import generate, get
    from ..algorithms.server_options import server_options
    from ..netsim import run_simulation
    from ..topology import parse_topology
    check_dtype(dtype, min(sizes, default=DTYPES.get(dtype, 1)))
    coll = same_collective(algorithms)
    topo = parse_topology(topology) if isinstance(topology, str) else topology
    rows = []
    for algo in algorithms:
        opts = server_options(algo, ranks, topo, with_root(algo, root, options), sim.get("placement", "first"),
                              sim.get("seed", 0))
        cache: dict[str, CollectivePattern] = {}
        for size in sizes:
            nbytes, count = nccl_count(coll, size, dtype, ranks)
            if nbytes == 0:
                continue
            p = generate(algo, ranks, size=float(nbytes), **opts)   # verified
            p = cache.setdefault(p.name, p)
            res = run_simulation(p, topology=topo, size=float(nbytes), epochs=warmup + iters, slowest=0,
                                 keep_traces=True, **sim)
            per_rank = np.mean([rank_finish(tr) for tr in res.traces[warmup:]], axis=0) if p.num_flows \
                else np.zeros(ranks)
            t = combine_times(per_rank, average)
            rows.append(make_row(algo, get(algo).collective, ranks, nbytes, count, dtype, p.root, (t, None),
                                 (t, None), p))
            if progress is not None:
                progress(algo, nbytes)
    return rows


def same_collective(algorithms: Sequence[str]) -> Collective:
    """The one collective of the registered generators ``algorithms``.

    Raises:
        PatternError: an unknown generator (from the registry).
        ValueError: generators of different collectives, named.
    """
    from ..algorithms import get
    colls = {a: Collective(get(a).collective) for a in algorithms}
    if len(set(colls.values())) > 1:
        raise ValueError("--algorithm: one collective per sweep; got " +
                         ", ".join(f"{a} ({c.value})" for a, c in colls.items()))
    return next(iter(colls.values()))


def with_root(algorithm: str, root: int, options: dict | None) -> dict:
    """``options`` plus ``root`` where the generator takes one and ``options`` do not set it."""
    import inspect

    from ..algorithms import get
    opts = dict(options or {})
    if "root" in inspect.signature(get(algorithm).func).parameters and "root" not in opts:
        opts["root"] = root
    return opts


def dist_sweep(*args, **kwargs):
    """:func:`reactccl.experiments.perf_real.dist_sweep` (real ranks; imports torch)."""
    from .perf_real import dist_sweep as run
    return run(*args, **kwargs)


def measure(*args, **kwargs):
    """:func:`reactccl.experiments.perf_real.measure` (real ranks; imports torch)."""
    from .perf_real import measure as run
    return run(*args, **kwargs)


def format_table(rows: Sequence[PerfRow], header: str = "") -> str:
    """:func:`reactccl.experiments.perf_format.format_table`."""
    from .perf_format import format_table as fmt
    return fmt(rows, header)

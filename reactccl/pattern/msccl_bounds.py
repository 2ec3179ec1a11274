"""What an MSCCL-XML import may cost, checked before its per-GPU and per-chunk loops.

An XML program sizes its work with a few attributes: a 78-byte ``<algo ngpus="1000000000"
nchunksperloop="1000000000" coll="allreduce"/>`` asks for 10^18 cells. So the importer
(:mod:`reactccl.pattern.msccl_import`) reads its integers strictly (:func:`xml_int`) and
estimates its peak memory (:func:`import_bytes`) twice: from the ``<algo>`` attributes alone,
before reading any ``<gpu>``, and again from the counted steps, threadblocks and moved cells,
before the symbolic run. Either estimate over the limit (:data:`DEFAULT_MAX_BYTES`, the one
:func:`reactccl.pattern.verify` uses for JSON patterns) is refused with the estimate named, as
the JSON path does.

Where the memory goes (the constants were measured with tracemalloc on exported ring, tree,
recursive doubling, Rabenseifner and ring-AllGather programs of 8-64 GPUs; tests/test_msccl_bounds.py
checks that the estimate bounds the measured peak):

* every buffer cell the program touches holds a value with a per-rank contribution count
  (``8 N`` bytes) plus ~600 bytes of Python objects (the value, its key, the dict slot, the
  record of the flow it becomes): the initial cells (``N K`` for AllReduce, Reduce and
  ReduceScatter, ``K`` for AllGather and Broadcast), the final cells checked (as many), and
  every cell a step moves (the sum of the steps' ``cnt``);
* the version table, ``8 N K`` bytes;
* every step ~2.5 KB (its XML element, its record, its edges);
* the vector clocks of the race check: one ``steps x threadblocks-of-that-GPU`` table at a time,
  plus the rows each GPU keeps (4 bytes a cell at most);
* the final :func:`reactccl.pattern.verify` of the rebuilt pattern (:func:`verify_bytes`).

Source: ours (the MSCCL executor bounds ``nchunksperloop`` and threadblocks by its own
compile-time limits, see :func:`reactccl.pattern.msccl_export.executor_limits`).
"""

from __future__ import annotations

import re

from .ir import MAX_INDEX
from .msccl_common import MAX_CHUNKS_PER_LOOP, MscclError
from .types import Collective, excerpt
from .verify import DEFAULT_MAX_BYTES, verify_bytes

__all__ = ["xml_int", "import_bytes", "check_import_size", "check_race_work", "MAX_RACE_WORK", "CELL_BYTES",
           "STEP_BYTES", "DEFAULT_MAX_BYTES"]

#: Python objects per buffer cell the program touches (besides its ``8 N``-byte count).
CELL_BYTES = 600
#: Per step: the XML element, the step record, its dependency edges and its place in the order.
STEP_BYTES = 2500
_DIGITS = re.compile(r"-?[0-9]+")


def xml_int(el, attr: str, where: str, default: int | None = None, lo: int = -1, hi: int = MAX_INDEX) -> int:
    """Attribute ``attr`` of element ``el`` as an integer in ``lo..hi``.

    Only ASCII digits with an optional leading ``-`` are integers here: ``int()`` would also
    read ``"٢"`` (an Arabic-Indic two), ``"+2"``, ``" 2_0 "`` (as 20) and thousands of digits.

    Raises:
        MscclError: missing without a default, not ASCII digits, or outside ``lo..hi``; the
            message names ``where`` and the attribute and echoes at most an excerpt of the value.
    """
    v = el.get(attr)
    if v is None:
        if default is not None:
            return default
        raise MscclError(f"{where}: attribute {attr!r} missing")
    if not _DIGITS.fullmatch(v):
        raise MscclError(f"{where}: attribute {attr}={excerpt(v)} is not an integer (ASCII digits, "
                         "optionally after '-')")
    if len(v.lstrip("-")) > 19:
        raise MscclError(f"{where}: attribute {attr} has {len(v.lstrip('-'))} digits, out of range {lo}..{hi}")
    x = int(v)
    if not lo <= x <= hi:
        raise MscclError(f"{where}: attribute {attr}={x} is out of range {lo}..{hi}")
    return x


def _cells(n: int, k: int, coll: Collective) -> int:
    """Cells holding data at the start, and output cells checked at the end (as many)."""
    return k if coll in (Collective.ALLGATHER, Collective.BROADCAST) else n * k


def import_bytes(n: int, k: int, coll: Collective, steps: int = 0, moved: int = 0, clock_peak: int = 0,
                 clock_kept: int = 0) -> int:
    """Upper estimate of the peak bytes of importing an MSCCL-XML program (module docstring).

    Args:
        n, k: ``ngpus`` and ``nchunksperloop``.
        coll: the collective.
        steps: ``<step>`` elements; moved: the sum of their ``cnt`` (cells moved or reduced).
        clock_peak: the largest ``steps x threadblocks-of-one-GPU`` vector-clock table.
        clock_kept: the clock rows kept for all GPUs (each GPU's steps x its threadblocks).

    Returns:
        Bytes; with only ``n, k, coll`` given, what any program with that header needs at least.
    """
    n, k = int(n), int(k)
    touched = 2 * _cells(n, k, coll) + int(moved)
    return (touched * (8 * n + CELL_BYTES) + 8 * n * k + STEP_BYTES * int(steps)
            + 4 * (int(clock_peak) + int(clock_kept))
            + verify_bytes(n, k, int(moved), int(moved), coll))


def check_import_size(n: int, k: int, coll: Collective, max_bytes: int = DEFAULT_MAX_BYTES, **counts: int) -> None:
    """Refuse a program whose :func:`import_bytes` estimate is over ``max_bytes``, or whose
    ``nchunksperloop`` is over :data:`MAX_CHUNKS_PER_LOOP` (the exporter's bound).

    Raises:
        MscclError: naming the attribute, or the estimate and the limit in the style of
            :func:`reactccl.pattern.verify`'s refusal.
    """
    if k > MAX_CHUNKS_PER_LOOP:
        raise MscclError(f"algo: nchunksperloop {k} is above {MAX_CHUNKS_PER_LOOP}, the most this importer (and "
                         "the exporter) handles")
    need = import_bytes(n, k, coll, **counts)
    if need > max_bytes:
        what = f" ({counts.get('steps', 0)} steps moving {counts.get('moved', 0)} cells)" if counts else ""
        raise MscclError(f"msccl import: symbolic run of {n} gpus x {k} chunks{what} needs about "
                         f"{need / 2**30:.2f} GiB (limit {max_bytes / 2**30:.2f} GiB); refused before running it")


#: The race check's budget (:func:`check_race_work`): about 25 s on one core (1.2e-8 s a cell).
MAX_RACE_WORK = 2_000_000_000
#: Cost of one level pass of one GPU, in clock-cell updates (Python-loop overhead, measured).
PASS_CELLS = 2_500


def check_race_work(cells: int, passes: int, max_work: int = MAX_RACE_WORK) -> None:
    """Refuse a race check that would run too long, before it starts.

    The check (:func:`reactccl.pattern.msccl_import._happens_before`) makes, for every GPU that
    has steps, one pass over the whole program level by level, updating a clock row of that
    GPU's threadblocks per step and per dependency edge.

    Args:
        cells: ``(steps + edges) x`` the sum over GPUs with steps of their threadblocks.
        passes: GPUs with steps ``x`` levels of the step order (one Python iteration each).

    Raises:
        MscclError: ``cells + PASS_CELLS * passes`` over ``max_work``, naming both counts.
    """
    work = int(cells) + PASS_CELLS * int(passes)
    if work > max_work:
        raise MscclError(f"msccl import: the race check would update {cells} clock cells in {passes} level passes "
                         f"(work {work:.2e}, limit {max_work:.2e}); program too large")

"""``KEY=VALUE`` lists of the command line (``--option``, ``--param``) as keyword arguments.

Shared by the subcommands that generate a pattern (``pattern``, ``simulate``, ``perf``) or set
REACT's parameters; the generators convert the text by their own annotations.
"""

from __future__ import annotations

from ..pattern import PatternError

__all__ = ["parse_options", "SERVERS_EXAMPLE"]

#: How to run a job on multi-GPU servers (``simulate --help``, ``pattern list``): on a topology of
#: servers ``ring`` and ``nccl-tree`` take their server options from it
#: (:mod:`reactccl.algorithms.server_options`).
SERVERS_EXAMPLE = ("reactccl simulate -a ring -n 32 -t rail:servers=4,gpus=8 -s 1GB -e 3 (NCCL's hierarchical ring "
                   "over 4 servers x 8 GPUs, one channel per NIC; add -O hierarchy=flat for the flat ring on the "
                   "same GPUs, -O channels=C for C channels)")


def parse_options(items: list[str] | None, typed: bool = False, flag: str = "--option") -> dict:
    """``["slices=4", "shape=8x4"]`` -> ``{"slices": "4", "shape": "8x4"}``: keys with ``-``
    as ``_``, values as the text given, for :func:`reactccl.algorithms.generate`, which
    converts them by the generator's annotations (so ``shape=8`` stays a one-side shape,
    and ``k=2.0`` is refused as not an integer instead of silently becoming 2).

    Args:
        typed: convert values here instead (ints, floats, ``true``/``false``, else text),
            for targets without annotations to go by (e.g. REACT's ``--param``).
        flag: the option's name in error messages.

    Raises:
        PatternError: an item without ``=``, or a key given twice.
    """
    out: dict = {}
    for item in items or []:
        if "=" not in item:
            raise PatternError(f"{flag} {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        if k.strip().replace("-", "_") in out:
            raise PatternError(f"{flag} {item!r}: {k.strip()!r} given twice")
        val: object = v.strip()
        if typed:
            for cast in (int, float):
                try:
                    val = cast(v)
                    break
                except ValueError:
                    pass
            if v.strip().lower() in ("true", "false"):
                val = v.strip().lower() == "true"
        out[k.strip().replace("-", "_")] = val
    return out

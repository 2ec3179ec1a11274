"""Registry of pattern generators by name.

A generator is a function ``f(num_ranks: int, **options) -> CollectivePattern``
registered with :func:`register`. :func:`generate` calls it and verifies the
result, so every pattern that leaves a generator is checked.
"""

from __future__ import annotations

import inspect
import numbers
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..pattern import CollectivePattern, PatternError, verify
from ..pattern.verify import DEFAULT_MAX_BYTES
from ..suggest import did_you_mean
from .sizes import generate_bytes, pattern_size

__all__ = ["Generator", "register", "generate", "checked_options", "options", "get", "names", "REGISTRY"]


@dataclass(frozen=True)
class Generator:
    """A registered generator: its name, collective, the function and a one-line summary."""

    name: str
    collective: str
    func: Callable[..., CollectivePattern]
    summary: str


REGISTRY: dict[str, Generator] = {}


def register(name: str, collective: str, summary: str) -> Callable:
    """Decorator: register ``func`` under ``name`` (errors on a duplicate name)."""
    def deco(func: Callable[..., CollectivePattern]) -> Callable[..., CollectivePattern]:
        if name in REGISTRY:
            raise ValueError(f"algorithm {name!r} registered twice")
        REGISTRY[name] = Generator(name, collective, func, summary)
        return func
    return deco


def get(name: str) -> Generator:
    """The generator called ``name``; PatternError with the close names (``nccl-trees``, ``tree`` ->
    did you mean 'nccl-tree'?) and the known ones otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise PatternError(f"unknown algorithm {name!r}{did_you_mean(name, REGISTRY)}; "
                           f"known: {', '.join(sorted(REGISTRY))}") from None


def names() -> list[str]:
    """Sorted names of all registered generators."""
    return sorted(REGISTRY)


def generate(name: str, num_ranks: int, check: bool = True, max_bytes: int = DEFAULT_MAX_BYTES,
             size: float | None = None, **options) -> CollectivePattern:
    """Generate pattern ``name`` for ``num_ranks`` ranks and verify it.

    ``size`` is the message the pattern will carry (bytes, nccl-tests' size), for generators
    whose layout depends on it (an option named ``size``: ``nccl-tree`` slices as NCCL does);
    it is passed to those, unless ``options`` set ``size`` themselves, and ignored by the others.

    Option values given as text (from a command line) are converted by the
    generator's annotations: ``"4"`` to an int, ``"0.5"`` to a float, ``"true"`` to a
    bool, a shape ``"8x4"``, ``"8,4"``, ``"(8, 4)"`` or ``[8, 4]`` to ``(8, 4)``.

    Before generating, the pattern's size is estimated (:mod:`reactccl.algorithms.sizes`)
    and a request whose generation (and verification) would take more than ``max_bytes``
    is refused with the estimate named.

    Raises:
        PatternError: unknown name, an unknown option or one of the wrong type (naming
            the option and value), arguments the generator refuses, a pattern too large
            to build within ``max_bytes``, or a generated pattern that fails
            :func:`reactccl.pattern.verify` (a bug, reported loudly).
    """
    gen = get(name)
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or num_ranks < 1:
        raise PatternError(f"num_ranks: expected an integer >= 1, got {num_ranks!r}")
    if size is not None and "size" not in options and "size" in inspect.signature(gen.func).parameters:
        options = {**options, "size": float(size)}
    options = checked_options(name, options)
    need = generate_bytes(name, num_ranks, options, check)
    if need is not None and need > max_bytes:
        chunks, pairs = pattern_size(name, num_ranks, options)
        raise PatternError(f"{name} with {num_ranks} ranks: about {pairs:,} flow-chunk pairs over {chunks:,} chunks "
                           f"need about {_gib(need)} to generate{' and verify' if check else ''} "
                           f"(limit {_gib(max_bytes)}); refused before generating")
    try:
        pattern = gen.func(num_ranks, **options)
    except ValueError as e:  # a generator's own argument checks (e.g. a torus side below 3)
        raise PatternError(f"{name} with {num_ranks} ranks: {e}") from e
    if check:
        verify(pattern)
    return pattern


def _gib(b: float) -> str:
    """Bytes in readable binary units (MiB, GiB, TiB, PiB)."""
    for unit, k, least in (("PiB", 50, 1.0), ("TiB", 40, 1.0), ("GiB", 30, 0.1)):
        if b >= 2**k * least:
            return f"{b / 2**k:.1f} {unit}"
    return f"{b / 2**20:.0f} MiB"


def checked_options(name: str, options: dict) -> dict:
    """``options`` for generator ``name``, each converted by the generator's annotation
    (see :func:`generate`); other generators of the same schedule (e.g. the compact forms
    of :mod:`reactccl.algorithms.compact`) take them through here too.

    Raises:
        PatternError: unknown name, an unknown option, or a value of the wrong type.
    """
    params = inspect.signature(get(name).func).parameters
    if any(v.kind is inspect.Parameter.VAR_KEYWORD for v in params.values()):
        return dict(options)
    known = list(params)[1:]
    bad = [k for k in options if k not in known]
    if bad:
        raise PatternError(f"{name}: unknown option {bad[0]!r}; options: {', '.join(known) or 'none'}")
    return {k: _coerce(name, k, v, params[k].annotation) for k, v in options.items()}


def _type_name(annotation) -> str:
    """A generator annotation (text under postponed evaluation) as a user-facing type name:
    ``int``, ``float``, ``bool``, ``str``, ``shape`` (a sequence of ints, e.g. 8x4), each
    with `` or none`` when ``None`` is allowed."""
    ann = str(annotation)
    if ann == str(inspect.Parameter.empty):
        return "any"
    if ann.startswith("Literal["):
        return "one of " + ", ".join(_choices(ann))
    base = "shape" if ("Sequence[int]" in ann or "tuple[int" in ann) else \
        ann.replace(" | None", "").replace("Optional[", "").rstrip("]").strip()
    return base + (" or none" if "None" in ann else "")


def _choices(ann: str) -> list[str]:
    """The quoted values of a ``Literal[...]`` annotation given as text."""
    return [a or b for a, b in re.findall(r"'([^']*)'|\"([^\"]*)\"", ann)]


def options(name: str) -> list[dict]:
    """The options of generator ``name`` from its signature: one dict per keyword argument
    after the rank count, ``{"name", "type", "default"}`` (type as :func:`_type_name` gives
    it, default JSON-ready: a tuple becomes a list, ``None`` stays ``None``; ``"required"``
    True where there is no default). Example: ``options("nccl-tree")`` ->
    ``[{"name": "slices", "type": "int or none", "default": None, "required": False}, {"name": "size", ...}]``.

    Raises:
        PatternError: unknown name.
    """
    params = list(inspect.signature(get(name).func).parameters.values())[1:]
    out = []
    for prm in params:
        if prm.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
            continue
        default = None if prm.default is inspect.Parameter.empty else prm.default
        if isinstance(default, tuple):
            default = list(default)
        out.append({"name": prm.name, "type": _type_name(prm.annotation), "default": default,
                    "required": prm.default is inspect.Parameter.empty})
    return out


def _coerce(name: str, key: str, value, annotation) -> object:
    """``value`` converted to what the annotation (a string under postponed evaluation)
    asks for; PatternError naming the option otherwise. Unannotated options pass through."""
    ann = str(annotation)
    bad = PatternError
    if ann.startswith("Literal["):
        if value not in _choices(ann):
            raise bad(f"{name}: option {key}: expected one of {', '.join(_choices(ann))}, got {value!r}")
        return value
    if "Sequence[int]" in ann or "tuple[int" in ann:
        if value is None and "None" in ann:
            return None
        items = value
        if isinstance(value, str):
            items = [t for t in value.strip("()[] ").replace("x", ",").split(",") if t.strip()]
        try:
            out = tuple(_as_int(v) for v in items)
        except (TypeError, ValueError):
            raise bad(f"{name}: option {key}: expected a shape like 8x4 or 8,4, got {value!r}") from None
        if not out:
            raise bad(f"{name}: option {key}: expected a shape like 8x4 or 8,4, got {value!r}")
        return out
    base = ann.replace(" | None", "").replace("Optional[", "").rstrip("]").strip()
    if value is None and "None" in ann:
        return None
    try:
        if base == "int":
            return _as_int(value)
        if base == "float":
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if base == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise ValueError
    except (TypeError, ValueError):
        kind = {"int": "an integer", "float": "a number", "bool": "true or false"}[base]
        raise bad(f"{name}: option {key}: expected {kind}, got {value!r}") from None
    if base == "str" and not isinstance(value, str):
        raise bad(f"{name}: option {key}: expected text, got {value!r}")
    return value


def _as_int(v) -> int:
    """``v`` as an int if it is one exactly (``"4"``, ``4``, ``4.0``); ValueError otherwise."""
    if isinstance(v, bool):
        raise ValueError(v)
    if isinstance(v, str):
        v = v.strip()
        if not v.lstrip("+-").isdigit():
            raise ValueError(v)
        return int(v)
    if isinstance(v, float):
        if not v.is_integer():
            raise ValueError(v)
        return int(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    raise ValueError(v)

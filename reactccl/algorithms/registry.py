"""Registry of pattern generators by name.

A generator is a function ``f(num_ranks: int, **options) -> CollectivePattern``
registered with :func:`register`. :func:`generate` calls it and verifies the
result, so every pattern that leaves a generator is checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..pattern import CollectivePattern, PatternError, verify

__all__ = ["Generator", "register", "generate", "get", "names", "REGISTRY"]


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
    """The generator called ``name``; PatternError listing the known names otherwise."""
    _load_all()
    try:
        return REGISTRY[name]
    except KeyError:
        raise PatternError(f"unknown algorithm {name!r}; known: {', '.join(sorted(REGISTRY))}") from None


def names() -> list[str]:
    """Sorted names of all registered generators."""
    _load_all()
    return sorted(REGISTRY)


def generate(name: str, num_ranks: int, check: bool = True, **options) -> CollectivePattern:
    """Generate pattern ``name`` for ``num_ranks`` ranks and verify it.

    Raises:
        PatternError: unknown name, bad options, or a generated pattern that
            fails :func:`reactccl.pattern.verify` (a bug, reported loudly).
    """
    gen = get(name)
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or num_ranks < 1:
        raise PatternError(f"num_ranks: expected an integer >= 1, got {num_ranks!r}")
    import inspect
    params = inspect.signature(gen.func).parameters
    if not any(v.kind is inspect.Parameter.VAR_KEYWORD for v in params.values()):
        known = [k for k in list(params)[1:]]
        bad = [k for k in options if k not in known]
        if bad:
            raise PatternError(f"{name}: unknown option {bad[0]!r}; options: {', '.join(known) or 'none'}")
    pattern = gen.func(num_ranks, **options)
    if check:
        verify(pattern)
    return pattern


def _load_all() -> None:
    # importing the package registers every built-in generator
    from .. import algorithms  # noqa: F401

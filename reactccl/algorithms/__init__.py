"""Pattern generators, registered by name (see :mod:`.registry`).

Knows nothing of executors. Importing this package registers every built-in generator:
each generator module is listed in ``_MODULES`` below.
"""

import importlib

from .registry import REGISTRY, Generator, generate, get, names, register

__all__ = ["REGISTRY", "Generator", "generate", "get", "names", "register"]

_MODULES = [
    # issue 2 generators
    "tree", "ring", "recursive", "binomial",
    # issue 5 generators
    "sp_allreduce", "bucket", "swing", "trivance", "torus_baselines", "kspt",
    # issue 35: AllToAll
    "alltoall",
]

for _m in _MODULES:
    importlib.import_module(f"{__name__}.{_m}")

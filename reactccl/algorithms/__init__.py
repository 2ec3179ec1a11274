"""Pattern generators, registered by name (see :mod:`.registry`).

Knows nothing of executors. Importing this package registers every built-in generator.
"""

from .registry import REGISTRY, Generator, generate, get, names, register

__all__ = ["REGISTRY", "Generator", "generate", "get", "names", "register"]

"""The collective-pattern IR (the time-expanded network), its exact check and its JSON form.

Knows nothing of networks or torch. See DESIGN.md "The pattern IR".
"""

from .builder import PatternBuilder
from .io import SCHEMA, dumps, from_dict, load, loads, save, to_dict
from .ir import CollectivePattern
from .types import Chunk, Collective, Flow, Op, PatternError
from .verify import VerificationError, VerifyResult, chunk_owner, verify, verify_bytes

__all__ = [
    "Chunk", "Collective", "CollectivePattern", "Flow", "Op", "PatternBuilder", "PatternError",
    "SCHEMA", "VerificationError", "VerifyResult", "chunk_owner", "dumps", "from_dict", "load",
    "loads", "save", "to_dict", "verify", "verify_bytes",
]

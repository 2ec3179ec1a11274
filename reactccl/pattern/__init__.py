"""The collective-pattern IR (the time-expanded network), its exact check, its JSON form and
MSCCL XML both ways.

Knows nothing of networks or torch. See DESIGN.md "The pattern IR".
"""

from .builder import PatternBuilder
from .digest import pattern_digest
from .io import SCHEMA, dumps, from_dict, load, loads, save, to_dict
from .ir import CollectivePattern
from .types import Chunk, Collective, Flow, Op, PatternError
from .verify import VerificationError, VerifyResult, chunk_dest, chunk_owner, verify, verify_bytes
from .files import load_pattern, save_pattern  # noqa: E402 - after the names they use
from .msccl_common import MscclError
from .msccl_export import to_msccl_xml
from .msccl_import import from_msccl_xml

__all__ = [
    "Chunk", "Collective", "CollectivePattern", "Flow", "Op", "PatternBuilder", "PatternError",
    "SCHEMA", "VerificationError", "VerifyResult", "chunk_dest", "chunk_owner", "dumps", "from_dict", "load",
    "loads", "pattern_digest", "save", "to_dict", "verify", "verify_bytes",
    "MscclError", "from_msccl_xml", "load_pattern", "save_pattern", "to_msccl_xml",
]

"""Pattern files of either kind: ``reactccl.pattern/1`` JSON or MSCCL XML, told apart by content."""

from __future__ import annotations

from pathlib import Path

from .io import MAX_FILE_BYTES, dumps, loads, read_bounded
from .ir import CollectivePattern
from .types import PatternError
from .msccl_export import to_msccl_xml
from .msccl_import import from_msccl_xml
from .verify import verify

__all__ = ["load_pattern", "save_pattern"]


def load_pattern(path: str | Path, check: bool = True) -> CollectivePattern:
    """Read a pattern file: MSCCL XML when it starts with ``<`` (imported and verified by
    :func:`reactccl.pattern.msccl_import.from_msccl_xml`), else ``reactccl.pattern/1`` JSON
    (verified too unless ``check=False``).

    The file is read with the same bound as :func:`reactccl.pattern.io.load` (at most
    ``MAX_FILE_BYTES``, invalid UTF-8 named).

    Raises:
        OSError: the file cannot be read.
        VerificationError: (a PatternError) a well-formed pattern, JSON (when checked) or MSCCL XML,
            that does not compute its collective (naming rank, chunk, step, or GPU and threadblock).
        PatternError: too large or malformed: not a pattern at all.
    """
    data = read_bounded(path, MAX_FILE_BYTES)
    if data.lstrip()[:1] == b"<":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PatternError(f"{path}: not valid UTF-8: byte 0x{e.object[e.start]:02x} at offset {e.start}") from None
        return from_msccl_xml(text, name=Path(path).stem)
    p = loads(data)
    if check:
        verify(p)
    return p


def save_pattern(pattern: CollectivePattern, path: str | Path) -> str:
    """Write ``pattern`` to ``path``: MSCCL XML for a ``.xml`` name, JSON otherwise. Returns the format
    written (``"msccl-xml"`` or ``"json"``)."""
    path = Path(path)
    if path.suffix.lower() == ".xml":
        path.write_text(to_msccl_xml(pattern))
        return "msccl-xml"
    path.write_text(dumps(pattern))
    return "json"

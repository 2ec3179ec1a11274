"""Plain-data collectives for the control plane: JSON bytes in uint8 tensors, never pickle.

``torch.distributed``'s ``*_object`` calls (``gather_object``, ``broadcast_object_list``,
``all_gather_object``) unpickle what arrives, so any process that can join the
rendezvous or reach a rank's Gloo port could make the receiver run code. These
replacements send ``json.dumps(obj)`` as bytes. The receiver parses JSON and nothing else;
sizes are bounded (:data:`MAX_MESSAGE_BYTES`) before anything is allocated, and a message
that is not valid UTF-8 JSON raises :class:`MessageError` naming the rank it came from.
Callers still check the shape of what they get (e.g.
:func:`reactccl.runtime.records.record_from_wire`).

Framing. :func:`all_gather_json` sends every rank's byte count first (an int64
all-gather), then the bytes padded to the longest. :func:`gather_json` and
:func:`broadcast_json`, which the REACT tuner runs every round, need one collective in the
usual case: each message goes as a frame of :data:`INLINE_BYTES` (an 8-byte length, then
the first bytes of the message, zero-padded); a longer message sends the rest afterwards,
point to point to the gatherer (who knows from the frames which ranks have more), or as a
second broadcast (every receiver knows from the frame that one follows). That halves the
tuner's control-plane collectives per round (four before: a size exchange ahead of each).

Sizes a peer cannot choose. Gloo checks that what arrives has the size the receiver posted
and aborts the receiving *process* when it does not (``gloo::EnforceNotMet ... 4097 vs 4096``,
from a thread nothing can catch it in). So no length a peer declares ever sizes a fixed-size
collective here: frames have the size the ranks agreed on (``frame_bytes``; :class:`RTuner`
checks that every rank has the same when its group is made), a sender checks its frame and
its tail against the length it declares *before* the collective (:func:`_outgoing`), and a
rank whose message cannot be encoded or framed sends an *error frame* of the agreed size
(length 0, then the reason), so the others learn why at once instead of waiting for a timeout.
The receiver checks each frame's declared length against what arrived (bytes after the
declared end are refused). This protects against a peer running this code with a bug or a
wrong setting; a process that runs other code and can reach a Gloo port can still abort its
peers (Gloo's own checks), which is why the control group listens on its own interface
(:mod:`.listen`).

On an NCCL group the tensors live on the current CUDA device; on Gloo, on the CPU.

Source: the byte-count-then-payload scheme of ``torch.distributed``'s object collectives,
without the pickling.
"""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

from ..errors import ReactcclError
from ..pattern.types import excerpt

__all__ = ["MessageError", "MAX_MESSAGE_BYTES", "gather_json", "broadcast_json", "all_gather_json",
           "encode", "decode"]

#: Largest message (bytes of JSON) a rank accepts: 64 MiB, far above a round's records.
MAX_MESSAGE_BYTES = 64 << 20
#: Bytes of the first frame of a gather/broadcast (8 of them the length): a 4-rank round's
#: records (~1 KB per bucket per rank) and a "keep" announcement fit in it.
INLINE_BYTES = 4096
_HEAD = 8
_TAG = (1 << 20) - 11


class MessageError(ReactcclError, ValueError):
    """A control-plane message was too large or not plain JSON; says which rank sent it."""


def _device(group) -> torch.device:
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def encode(obj, max_bytes: int = MAX_MESSAGE_BYTES) -> bytes:
    """``obj`` (dicts, lists, str, int, finite float, bool, None) as compact JSON bytes.

    Raises:
        MessageError: not JSON data (a NaN, an object of another type) or over ``max_bytes``.
    """
    try:
        data = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise MessageError(f"control-plane message is not plain JSON data: {e}") from None
    if len(data) > max_bytes:
        raise MessageError(f"control-plane message of {len(data)} bytes is over the limit of {max_bytes}")
    return data


def decode(data: bytes, sender: str = "a peer"):
    """Parse JSON ``data`` that came from ``sender`` (e.g. ``"rank 3"``).

    Raises:
        MessageError: not UTF-8, not JSON, or nested too deeply to parse.
    """
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise MessageError(f"control-plane message from {sender} is not valid JSON ({type(e).__name__}: "
                           f"{str(e)[:120]})") from None


def _tensor(data: bytes, size: int, device: torch.device) -> torch.Tensor:
    t = torch.zeros(max(size, 1), dtype=torch.uint8)
    if data:
        t[:len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return t.to(device)


def _bytes(t: torch.Tensor, n: int) -> bytes:
    return t[:n].cpu().numpy().tobytes()


def _sizes(n: int, group, device: torch.device, max_bytes: int) -> list[int]:
    world = dist.get_world_size(group)
    mine = torch.tensor([n], dtype=torch.int64, device=device)
    allv = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(world)]
    dist.all_gather(allv, mine, group=group)
    sizes = [int(v.item()) for v in allv]
    for r, s in enumerate(sizes):
        if s == 0:
            raise MessageError(f"rank {r} could not send its control-plane message (it failed to encode it)")
        if not 0 < s <= max_bytes:
            raise MessageError(f"rank {r} announced a control-plane message of {s} bytes "
                               f"(limit {max_bytes})")
    return sizes


def _frame(data: bytes, device: torch.device, size: int = INLINE_BYTES) -> torch.Tensor:
    """``data``'s first frame of ``size`` bytes: its length (int64, little-endian), then its first bytes."""
    buf = bytearray(size)
    head = data[:size - _HEAD]
    buf[:_HEAD] = len(data).to_bytes(_HEAD, "little")
    buf[_HEAD:_HEAD + len(head)] = head
    return torch.frombuffer(buf, dtype=torch.uint8).to(device)


def _error_frame(why: str, device: torch.device, size: int) -> torch.Tensor:
    """A frame of ``size`` bytes that says its sender has no message: length 0, then ``why``
    (UTF-8, cut to the frame)."""
    buf = bytearray(size)
    text = why.encode("utf-8", "replace")[:size - _HEAD]
    buf[_HEAD:_HEAD + len(text)] = text
    return torch.frombuffer(buf, dtype=torch.uint8).to(device)


def _outgoing(obj, max_bytes: int, size: int, device: torch.device) -> tuple[bytes, torch.Tensor, MessageError | None]:
    """What a rank puts into a fixed-size collective: ``(data, frame, error)``. The frame is
    checked here, before the collective: a Gloo peer that receives a frame of another size
    aborts its process (``gloo::EnforceNotMet ... 4097 vs 4096``), so a message that cannot be
    encoded, or a frame that came out at another size or dtype, goes as an error frame of
    exactly ``size`` bytes (and the error is raised after the collective)."""
    try:
        data = encode(obj, max_bytes)
        frame = _frame(data, device, size)
        if frame.dtype != torch.uint8 or frame.dim() != 1 or frame.numel() != size:
            raise MessageError(f"control-plane frame of {frame.numel()} {frame.dtype} elements, expected {size} "
                               "bytes; not sent")
    except MessageError as e:
        return b"", _error_frame(str(e), device, size), e
    return data, frame, None


def _rest(data: bytes, size: int, device: torch.device) -> torch.Tensor | None:
    """The bytes of ``data`` after its first frame of ``size`` bytes (None when it fits), sized
    by the same length the frame declares."""
    extra = len(data) - (size - _HEAD)
    if extra <= 0:
        return None
    rest = _tensor(data[-extra:], extra, device)
    if rest.numel() != extra:   # the receiver posts exactly the declared length
        raise MessageError(f"control-plane message tail of {rest.numel()} bytes, expected {extra}")
    return rest


def _length(frame: torch.Tensor, sender: int, max_bytes: int) -> int:
    """The length ``sender``'s frame declares, checked against what arrived.

    Raises:
        MessageError: an error frame (naming the sender's reason), a length over ``max_bytes``,
            or a frame with bytes after the declared message (a frame that is not what it says)."""
    size = frame.numel()
    n = int.from_bytes(_bytes(frame, _HEAD), "little")
    if n == 0:
        why = _bytes(frame, size)[_HEAD:].rstrip(b"\0").decode("utf-8", "replace")
        raise MessageError(f"rank {sender} could not send its control-plane message: {excerpt(why, 200, quote=False)}")
    if not 0 < n <= max_bytes:
        raise MessageError(f"rank {sender} announced a control-plane message of {n} bytes (limit {max_bytes})")
    if n < size - _HEAD and bool(frame[_HEAD + n:].any()):
        raise MessageError(f"rank {sender}'s control-plane frame holds more than the {n} bytes it declares")
    return n


def _join(frame: torch.Tensor, n: int, rest: torch.Tensor | None) -> bytes:
    size = frame.numel()
    first = _bytes(frame, _HEAD + min(n, size - _HEAD))[_HEAD:]
    return first if rest is None else first + _bytes(rest, n - len(first))


def gather_json(obj, dst: int, group=None, max_bytes: int = MAX_MESSAGE_BYTES,
                frame_bytes: int = INLINE_BYTES) -> list | None:
    """Collective: every rank sends ``obj``; rank ``dst`` (a global rank) gets the list of
    all ranks' objects in group-rank order, the others None. One gather of ``frame_bytes``
    frames (:data:`INLINE_BYTES` unless the ranks agreed on another size), plus a point-to-point
    send per rank whose message is longer. A rank whose message cannot be sent (over
    ``max_bytes``, not JSON) still takes part, with an error frame, so ``dst`` learns why at once.

    Raises:
        MessageError: a message over ``max_bytes`` or not JSON (on its sender, after the gather),
            or one that is announced over it, does not parse, or came as an error frame (on ``dst``).
    """
    device = _device(group)
    data, frame, mine_bad = _outgoing(obj, max_bytes, frame_bytes, device)
    if dist.get_rank() != dst:
        dist.gather(frame, None, dst=dst, group=group)
        if mine_bad is not None:
            raise mine_bad
        tail = _rest(data, frame_bytes, device)
        if tail is not None:
            dist.send(tail, dst, group=group, tag=_TAG)
        return None
    frames = [torch.zeros(frame_bytes, dtype=torch.uint8, device=device) for _ in range(dist.get_world_size(group))]
    dist.gather(frame, frames, dst=dst, group=group)
    me = dist.get_group_rank(group, dst) if group is not None else dst
    sizes: list = []
    bad = mine_bad
    for r, f in enumerate(frames):
        try:
            sizes.append(_length(f, r, max_bytes) if r != me else len(data))
        except MessageError as e:
            sizes.append(None)
            bad = bad or e
    rest: dict = {}
    for r, n in enumerate(sizes):      # every longer message is received (the senders block on it), then checked
        if r != me and n is not None and n > frame_bytes - _HEAD:
            buf = torch.zeros(n - (frame_bytes - _HEAD), dtype=torch.uint8, device=device)
            src = dist.get_global_rank(group, r) if group is not None else r
            rest[r] = (buf, dist.irecv(buf, src, group=group, tag=_TAG))
    for _buf, work in rest.values():
        work.wait()
    if bad is not None:
        raise bad
    return [decode(data if r == me else _join(f, n, rest.get(r, (None,))[0]), f"rank {r}")
            for r, (f, n) in enumerate(zip(frames, sizes, strict=True))]


def all_gather_json(obj, group=None, max_bytes: int = MAX_MESSAGE_BYTES) -> list:
    """Collective: every rank gets every rank's ``obj`` (group-rank order). The byte counts go
    first (an int64 all-gather), then the messages padded to the longest, a size every rank
    computes from the same counts. A rank whose message cannot be encoded announces 0 bytes,
    so every rank raises at once, naming it.

    Raises:
        MessageError: a message over ``max_bytes``, one that cannot be encoded, or one that
            does not parse.
    """
    device = _device(group)
    try:
        data, mine_bad = encode(obj, max_bytes), None
    except MessageError as e:
        data, mine_bad = b"", e
    try:
        sizes = _sizes(len(data), group, device, max_bytes)
    except MessageError:
        if mine_bad is not None:
            raise mine_bad from None
        raise
    buf = _tensor(data, max(sizes), device)
    out = [torch.zeros_like(buf) for _ in sizes]
    dist.all_gather(out, buf, group=group)
    return [decode(_bytes(t, n), f"rank {r}") for r, (t, n) in enumerate(zip(out, sizes, strict=True))]


def broadcast_json(obj, src: int, group=None, max_bytes: int = MAX_MESSAGE_BYTES, frame_bytes: int = INLINE_BYTES):
    """Collective: rank ``src`` (a global rank) sends ``obj``; every rank returns it
    (``obj`` is ignored elsewhere). One broadcast of a ``frame_bytes`` frame, and a
    second one with the rest of a longer message. A message ``src`` cannot send goes as an
    error frame: every rank raises at once, naming why.

    Raises:
        MessageError: over ``max_bytes``, not JSON, or not parseable (on every rank).
    """
    device = _device(group)
    me = dist.get_rank() == src
    if me:
        data, frame, mine_bad = _outgoing(obj, max_bytes, frame_bytes, device)
    else:
        frame = torch.zeros(frame_bytes, dtype=torch.uint8, device=device)
    dist.broadcast(frame, src=src, group=group)
    if me:
        if mine_bad is not None:
            raise mine_bad
        rest = _rest(data, frame_bytes, device)
        if rest is not None:
            dist.broadcast(rest, src=src, group=group)
        return obj
    sender = dist.get_group_rank(group, src) if group is not None else src
    size = _length(frame, sender, max_bytes)
    rest = None
    if size > frame_bytes - _HEAD:
        rest = torch.zeros(size - (frame_bytes - _HEAD), dtype=torch.uint8, device=device)
        dist.broadcast(rest, src=src, group=group)
    return decode(_join(frame, size, rest), f"rank {src}")

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

On an NCCL group the tensors live on the current CUDA device; on Gloo, on the CPU.

Source: the byte-count-then-payload scheme of ``torch.distributed``'s object collectives,
without the pickling.
"""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

from ..errors import ReactcclError

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
        if not 0 < s <= max_bytes:
            raise MessageError(f"rank {r} announced a control-plane message of {s} bytes "
                               f"(limit {max_bytes})")
    return sizes


def _frame(data: bytes, device: torch.device) -> torch.Tensor:
    """``data``'s first frame: its length (int64, little-endian), then its first bytes."""
    buf = bytearray(INLINE_BYTES)
    head = data[:INLINE_BYTES - _HEAD]
    buf[:_HEAD] = len(data).to_bytes(_HEAD, "little")
    buf[_HEAD:_HEAD + len(head)] = head
    return torch.frombuffer(buf, dtype=torch.uint8).to(device)


def _length(frame: torch.Tensor, sender: int, max_bytes: int) -> int:
    n = int.from_bytes(_bytes(frame, _HEAD), "little")
    if not 0 < n <= max_bytes:
        raise MessageError(f"rank {sender} announced a control-plane message of {n} bytes (limit {max_bytes})")
    return n


def _join(frame: torch.Tensor, n: int, rest: torch.Tensor | None) -> bytes:
    first = _bytes(frame, _HEAD + min(n, INLINE_BYTES - _HEAD))[_HEAD:]
    return first if rest is None else first + _bytes(rest, n - len(first))


def gather_json(obj, dst: int, group=None, max_bytes: int = MAX_MESSAGE_BYTES) -> list | None:
    """Collective: every rank sends ``obj``; rank ``dst`` (a global rank) gets the list of
    all ranks' objects in group-rank order, the others None. One gather of
    :data:`INLINE_BYTES` frames, plus a point-to-point send per rank whose message is longer.

    Raises:
        MessageError: a message over ``max_bytes`` (on its sender) or one that is announced
            over it or does not parse (on ``dst``).
    """
    device = _device(group)
    data = encode(obj, max_bytes)
    frame = _frame(data, device)
    extra = len(data) - (INLINE_BYTES - _HEAD)
    if dist.get_rank() != dst:
        dist.gather(frame, None, dst=dst, group=group)
        if extra > 0:
            dist.send(_tensor(data[-extra:], extra, device), dst, group=group, tag=_TAG)
        return None
    frames = [torch.zeros_like(frame) for _ in range(dist.get_world_size(group))]
    dist.gather(frame, frames, dst=dst, group=group)
    me = dist.get_group_rank(group, dst) if group is not None else dst
    sizes: list = []
    bad = None
    for r, f in enumerate(frames):
        try:
            sizes.append(_length(f, r, max_bytes))
        except MessageError as e:
            sizes.append(None)
            bad = bad or e
    rest: dict = {}
    for r, n in enumerate(sizes):      # every longer message is received (the senders block on it), then checked
        if r != me and n is not None and n > INLINE_BYTES - _HEAD:
            buf = torch.zeros(n - (INLINE_BYTES - _HEAD), dtype=torch.uint8, device=device)
            src = dist.get_global_rank(group, r) if group is not None else r
            rest[r] = (buf, dist.irecv(buf, src, group=group, tag=_TAG))
    for buf, work in rest.values():
        work.wait()
    if bad is not None:
        raise bad
    return [decode(data if r == me else _join(f, n, rest.get(r, (None,))[0]), f"rank {r}")
            for r, (f, n) in enumerate(zip(frames, sizes))]


def all_gather_json(obj, group=None, max_bytes: int = MAX_MESSAGE_BYTES) -> list:
    """Collective: every rank gets every rank's ``obj`` (group-rank order).

    Raises:
        MessageError: a message over ``max_bytes`` or one that does not parse.
    """
    device = _device(group)
    data = encode(obj, max_bytes)
    sizes = _sizes(len(data), group, device, max_bytes)
    buf = _tensor(data, max(sizes), device)
    out = [torch.zeros_like(buf) for _ in sizes]
    dist.all_gather(out, buf, group=group)
    return [decode(_bytes(t, n), f"rank {r}") for r, (t, n) in enumerate(zip(out, sizes))]


def broadcast_json(obj, src: int, group=None, max_bytes: int = MAX_MESSAGE_BYTES):
    """Collective: rank ``src`` (a global rank) sends ``obj``; every rank returns it
    (``obj`` is ignored elsewhere). One broadcast of an :data:`INLINE_BYTES` frame, and a
    second one with the rest of a longer message.

    Raises:
        MessageError: over ``max_bytes`` or not parseable (on the receivers).
    """
    device = _device(group)
    me = dist.get_rank() == src
    data = encode(obj, max_bytes) if me else b""
    frame = _frame(data, device) if me else torch.zeros(INLINE_BYTES, dtype=torch.uint8, device=device)
    dist.broadcast(frame, src=src, group=group)
    if me:
        extra = len(data) - (INLINE_BYTES - _HEAD)
        if extra > 0:
            dist.broadcast(_tensor(data[-extra:], extra, device), src=src, group=group)
        return obj
    sender = dist.get_group_rank(group, src) if group is not None else src
    size = _length(frame, sender, max_bytes)
    rest = None
    if size > INLINE_BYTES - _HEAD:
        rest = torch.zeros(size - (INLINE_BYTES - _HEAD), dtype=torch.uint8, device=device)
        dist.broadcast(rest, src=src, group=group)
    return decode(_join(frame, size, rest), f"rank {src}")

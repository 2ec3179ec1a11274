"""Plain-data collectives for the control plane: JSON bytes in uint8 tensors, never pickle.

``torch.distributed``'s ``*_object`` calls (``gather_object``, ``broadcast_object_list``,
``all_gather_object``) unpickle what arrives, so any process that can join the
rendezvous or reach a rank's Gloo port could make the receiver run code. These
replacements send ``json.dumps(obj)`` as bytes: first every rank's byte count
(an int64 all-gather, or a broadcast), then the bytes padded to the longest. The
receiver parses JSON and nothing else; sizes are bounded (:data:`MAX_MESSAGE_BYTES`)
before anything is allocated, and a message that is not valid UTF-8 JSON raises
:class:`MessageError` naming the rank it came from. Callers still check the shape of
what they get (e.g. :func:`reactccl.runtime.records.record_from_wire`).

On an NCCL group the tensors live on the current CUDA device; on Gloo, on the CPU.

Source: the byte-count-then-payload scheme of ``torch.distributed``'s object collectives,
without the pickling.
"""

from __future__ import annotations

import json

import torch
import torch.distributed as dist

__all__ = ["MessageError", "MAX_MESSAGE_BYTES", "gather_json", "broadcast_json", "all_gather_json",
           "encode", "decode"]

#: Largest message (bytes of JSON) a rank accepts: 64 MiB, far above a round's records.
MAX_MESSAGE_BYTES = 64 << 20


class MessageError(ValueError):
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


def gather_json(obj, dst: int, group=None, max_bytes: int = MAX_MESSAGE_BYTES) -> list | None:
    """Collective: every rank sends ``obj``; rank ``dst`` (a global rank) gets the list of
    all ranks' objects in group-rank order, the others None.

    Raises:
        MessageError: a message over ``max_bytes`` (on every rank) or one that does not parse (on ``dst``).
    """
    device = _device(group)
    data = encode(obj, max_bytes)
    sizes = _sizes(len(data), group, device, max_bytes)
    buf = _tensor(data, max(sizes), device)
    if dist.get_rank() == dst:
        out = [torch.zeros_like(buf) for _ in sizes]
        dist.gather(buf, out, dst=dst, group=group)
        return [decode(_bytes(t, n), f"rank {r}") for r, (t, n) in enumerate(zip(out, sizes))]
    dist.gather(buf, None, dst=dst, group=group)
    return None


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
    (``obj`` is ignored elsewhere).

    Raises:
        MessageError: over ``max_bytes`` or not parseable (on the receivers).
    """
    device = _device(group)
    me = dist.get_rank() == src
    data = encode(obj, max_bytes) if me else b""
    n = torch.tensor([len(data)], dtype=torch.int64, device=device)
    dist.broadcast(n, src=src, group=group)
    size = int(n.item())
    if not 0 < size <= max_bytes:
        raise MessageError(f"rank {src} announced a control-plane message of {size} bytes (limit {max_bytes})")
    buf = _tensor(data, size, device)
    dist.broadcast(buf, src=src, group=group)
    return obj if me else decode(_bytes(buf, size), f"rank {src}")

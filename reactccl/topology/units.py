"""Parsing of human units used in specs and on the command line.

Rates are bit/s, times seconds, sizes bytes (decimal units as nccl-tests uses
them: 20MB = 20e6 bytes, 1TB = 1e12; binary units KiB/MiB/GiB/TiB are 2^10/2^20/2^30/2^40).
"""

from __future__ import annotations

import re

from ..errors import ReactcclError

__all__ = ["parse_rate", "parse_time", "parse_size", "parse_bytes", "UnitError"]


class UnitError(ReactcclError, ValueError):
    """A quantity string could not be parsed; the message names the field."""


_NUM = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"   # a sign is read, so "-1MB" is refused as negative

_RATE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_TIME = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_SIZE = {"": 1.0, "b": 1.0, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12,
         "tb": 1e12, "kib": 2.0 ** 10, "mib": 2.0 ** 20, "gib": 2.0 ** 30, "tib": 2.0 ** 40}


def _parse(text: str | float | int, units: dict[str, float], what: str, strip: tuple[str, ...] = (),
           allow_zero: bool = False, require_unit: str | None = None, refuse: str = "") -> float:
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip()
        m = re.fullmatch(_NUM + r"\s*([A-Za-zµ/]*)", s)
        if not m:
            raise UnitError(f"{what}: cannot parse {text!r}")
        if refuse and refuse in m.group(2):     # a rate in bytes (case matters: B bytes, b bits)
            raise UnitError(f"{what}: {text!r} reads as bytes per second; rates are bits per second, "
                            "e.g. 100Gbps (1 GB/s = 8Gbps)")
        unit = m.group(2).lower()
        for suffix in strip:
            if unit.endswith(suffix) and unit[: -len(suffix)] in units:
                unit = unit[: -len(suffix)]
                break
        if unit not in units:
            raise UnitError(f"{what}: unknown unit {m.group(2)!r} in {text!r}; "
                            f"expected one of {sorted(u for u in units if u)}")
        if require_unit and not m.group(2):
            raise UnitError(f"{what}: {text!r} has no unit; did you mean {m.group(1)}{require_unit}?")
        value = float(m.group(1)) * units[unit]
    if value == float("inf") or value != value or value < 0 or (value == 0 and not allow_zero):
        raise UnitError(f"{what}: must be a {'non-negative' if allow_zero else 'positive'} finite number, "
                        f"got {text!r}")
    return value


def parse_rate(text: str | float, what: str = "rate", require_unit: bool = False) -> float:
    """A link rate in bit/s: ``100G``, ``100Gbps``, ``30g``, ``1e11``.

    ``require_unit=True`` (command lines) refuses a bare number in a string, so that
    ``400`` is not silently 400 bit/s; the error suggests ``400Gbps``.

    A capital ``B`` is bytes, not bits: ``1GB`` or ``1GBps`` is refused (a rate of bytes per second
    read as bits would be 8x off); write ``8Gbps``.

    Raises:
        UnitError: unparsable, unknown unit, a bytes unit, no unit when one is required, or not > 0.
    """
    return _parse(text, _RATE, what, strip=("bps", "bit/s", "b"), require_unit="Gbps" if require_unit else None,
                  refuse="B")


def parse_time(text: str | float, what: str = "time", allow_zero: bool = False) -> float:
    """A time in seconds: ``1us``, ``2µs``, ``500ns``, ``2ms``, ``1e-6``.

    ``allow_zero=True`` accepts 0 (e.g. a per-round overhead or hop latency that is absent).

    Raises:
        UnitError: unparsable, unknown unit, negative, infinite, or 0 unless allowed.
    """
    return _parse(text, _TIME, what, allow_zero=allow_zero)


#: A size unit that names bits: a lowercase ``b`` after a capital prefix (``Mb``, ``Gb``, ``Kib``).
_BITS = re.compile(r"\s*([KMGT])(i?)b\s*$")


def parse_size(text: str | float, what: str = "size") -> float:
    """A size in bytes, possibly fractional (memory limits, queue sizes): ``20MB`` (20e6),
    ``64KiB`` (65536), ``2TiB``, ``1e6``. Message sizes use :func:`parse_bytes`.

    ``20Mb``, ``1Gb`` (a capital prefix, then a lowercase ``b``) are megabits and gigabits to most
    network people and are refused, with the sizes in bytes they would be; an all-lowercase unit
    (``20mb``) reads as bytes, as the shorthand is commonly used.

    Raises:
        UnitError: unparsable, a unit of bits, unknown unit, negative, infinite or 0.
    """
    if isinstance(text, str):
        m = re.fullmatch(_NUM + _BITS.pattern, text.strip())
        if m:
            num, prefix, i = m.group(1), m.group(2), m.group(3)
            k = "KMGT".index(prefix)
            nbytes = float(num) * (2.0 ** (10 * k + 10) if i else 10.0 ** (3 * k + 3)) / 8
            shown = str(int(nbytes)) if nbytes == int(nbytes) else f"{nbytes:g}"
            name = f"{prefix}{i}bit".replace("Mbit", "megabit").replace("Gbit", "gigabit").replace("Kbit", "kilobit")
            raise UnitError(f"{what}: {text!r} is {num} {name}s (a lowercase b is bits); sizes are bytes: write "
                            f"{num}{prefix}{i}B for {num} {prefix}{i}B, or {shown} for {num} {name}s")
    return _parse(text, _SIZE, what)


MAX_BYTES = 2 ** 50  # 1 PiB: beyond anything a collective sends, and exact in a float


def parse_bytes(text: str | int, what: str = "size") -> int:
    """A message size as a whole number of bytes >= 1: ``64KiB`` (65536), ``1.5KiB``
    (1536), ``100KB`` (100000), ``3`` (3).

    Raises:
        UnitError: unparsable, not a whole number of bytes (``1.5``, ``0.3KB``), below 1 byte
            or above :data:`MAX_BYTES`.
    """
    value = parse_size(text, what)
    if value > MAX_BYTES:
        raise UnitError(f"{what}: {text!r} is more than 1 PiB (2^50 bytes)")
    if value != int(value):
        raise UnitError(f"{what}: {text!r} is {value:g} bytes, not a whole number of bytes")
    return int(value)

"""Link shaping for the emulated cluster: htb rate limit with a byte-limited FIFO.

Measured on the machines this project runs on (issue 4): an htb class with a
``bfifo limit 256kb`` child keeps the *link* the bottleneck; tbf with a small
burst (64 kb) makes the kernel segment GSO packets in software and the CPU,
not the link, limits throughput. The kernel has no netem or fq, so there is no
delay emulation: latency is the veth's (microseconds) plus queueing in the
256 KiB FIFO (about 10 ms at 200 Mbit/s when full).
"""

from __future__ import annotations

import re

from .netns import TestbedError, tc

__all__ = ["parse_rate", "format_rate_tc", "parse_size", "shape_egress", "DEFAULT_QUEUE_BYTES"]

#: bfifo limit in bytes (tc's "256kb" = 256 KiB).
DEFAULT_QUEUE_BYTES = 256 * 1024

_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
_SIZE_UNITS = {"": 1, "b": 1, "kb": 1024, "k": 1024, "mb": 1024**2, "m": 1024**2}


def parse_rate(text: str | int | float) -> int:
    """``"200mbit"`` -> 200_000_000 (bit/s). Units as in tc: bit, kbit, mbit, gbit (powers of 10).

    A bare number is bit/s. Byte units (tc's ``mbps`` means MB/s) are refused
    to avoid an 8x mistake. Raises ValueError for anything else or a rate <= 0.
    """
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
        unit = m.group(2).lower() if m else ""
        if not m or unit not in ("", *_RATE_UNITS):
            raise ValueError(f"rate {text!r}: expected a number with unit bit, kbit, mbit or gbit "
                             "(e.g. 200mbit); byte units like mbps are not accepted")
        value = float(m.group(1)) * _RATE_UNITS.get(unit, 1)
    if value < 8000:
        raise ValueError(f"rate {text!r}: must be at least 8kbit")
    return int(value)


def format_rate_tc(bits_per_s: int) -> str:
    """A rate for tc's command line, exact: ``200000000`` -> ``"200000000bit"``."""
    return f"{int(bits_per_s)}bit"


def parse_size(text: str | int) -> int:
    """``"256kb"`` -> 262144 bytes (tc's meaning: kb = KiB). Raises ValueError."""
    if isinstance(text, int):
        value = text
    else:
        m = re.fullmatch(r"\s*([0-9]+)\s*([a-zA-Z]*)\s*", text)
        if not m or m.group(2).lower() not in _SIZE_UNITS:
            raise ValueError(f"size {text!r}: expected bytes with optional unit b, kb, mb (e.g. 256kb)")
        value = int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if value < 3000:
        raise ValueError(f"queue size {text!r}: must hold at least two 1500-byte packets")
    return value


def shape_egress(ns: str, dev: str, rate_bps: int, queue_bytes: int = DEFAULT_QUEUE_BYTES) -> None:
    """Limit egress of ``dev`` in ``ns`` to ``rate_bps`` bit/s: htb root, one class, bfifo child.

    ``tc qdisc add dev DEV root handle 1: htb default 10``;
    ``tc class add ... classid 1:10 htb rate R ceil R quantum 60000``;
    ``tc qdisc add ... parent 1:10 handle 10: bfifo limit Q``.
    The explicit quantum only silences htb's "quantum is big" warning (one class,
    so it has no effect on scheduling). Raises TestbedError if tc fails.
    """
    if rate_bps <= 0 or queue_bytes <= 0:
        raise TestbedError(f"shape {ns}/{dev}: rate {rate_bps} and queue {queue_bytes} must be > 0")
    rate = format_rate_tc(rate_bps)
    tc(ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "10")
    tc(ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb",
       "rate", rate, "ceil", rate, "quantum", "60000")
    tc(ns, "qdisc", "add", "dev", dev, "parent", "1:10", "handle", "10:", "bfifo",
       "limit", str(int(queue_bytes)))

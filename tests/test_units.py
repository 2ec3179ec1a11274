"""Unit parsing for the command lines: zero times where allowed, rates with units, whole bytes."""

import pytest

from reactccl.experiments.sp_figures import fmt_size
from reactccl.topology.units import UnitError, parse_bytes, parse_rate, parse_time


def test_time_zero_only_when_allowed_and_named():
    assert parse_time("0", "--alpha", allow_zero=True) == 0.0
    assert parse_time("0ns", "--hop-latency", allow_zero=True) == 0.0
    assert parse_time("1us", "--alpha", allow_zero=True) == pytest.approx(1e-6)
    with pytest.raises(UnitError, match="--alpha: must be a positive"):
        parse_time("0", "--alpha")
    with pytest.raises(UnitError, match="--alpha: must be a non-negative finite number, got '-1us'"):
        parse_time("-1us", "--alpha", allow_zero=True)
    with pytest.raises(UnitError, match="--alpha: cannot parse"):
        parse_time("--1us", "--alpha", allow_zero=True)


def test_rate_needs_a_unit_on_command_lines():
    with pytest.raises(UnitError, match="--link-rate: '400' has no unit; did you mean 400Gbps"):
        parse_rate("400", "--link-rate", require_unit=True)
    assert parse_rate("400Gbps", "--link-rate", require_unit=True) == 400e9
    assert parse_rate("400") == 400.0  # specs keep bare bit/s


@pytest.mark.parametrize("text, value", [("64KiB", 65536), ("1.5KiB", 1536), ("100KB", 100000), ("3", 3),
                                         ("1e6", 10 ** 6), ("0.3KB", 300)])
def test_parse_bytes_whole(text, value):
    assert parse_bytes(text, "--sizes") == value and isinstance(parse_bytes(text), int)


@pytest.mark.parametrize("text, words", [("1.5", "1.5 bytes, not a whole number"), ("0", "positive"),
                                         ("1e300", "more than 1 PiB"), ("0.0005KB", "0.5 bytes")])
def test_parse_bytes_rejects(text, words):
    with pytest.raises(UnitError, match="--size") as e:
        parse_bytes(text, "--size")
    assert words in str(e.value)


@pytest.mark.parametrize("b, label", [(65536, "64 KiB"), (100000, "100 KB"), (1536, "1.5 KiB"), (3, "3 B"),
                                      (2 ** 30, "1 GiB"), (256 << 20, "256 MiB"), (10 ** 6, "1 MB"),
                                      (1000, "1 KB"), (1001, "1001 B")])
def test_fmt_size_exact(b, label):
    assert fmt_size(b) == label

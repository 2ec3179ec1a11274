"""The benches' noise test (bench/_stats.py): paired ratios and the median's order-statistic CI."""

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("bench_stats", Path(__file__).parents[1] / "bench" / "_stats.py")
stats = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stats)


def test_median_ci_order_statistics():
    # n = 9: P(B <= 1) = 10/512, so 2 P = 0.039 <= 0.05 and P(B <= 2) = 46/512 is too much: [x2, x8]
    assert stats.median_ci(range(1, 10)) == (5, 2, 8)
    # n = 20: P(B <= 5) = 21700/2^20 = 0.0207 (2 P = 0.041), P(B <= 6) = 0.0577: [x6, x15]
    assert stats.median_ci([float(v) for v in range(20, 0, -1)]) == (10.5, 6.0, 15.0)
    # n = 5 is too few for 95%: the whole range
    assert stats.median_ci([3, 1, 2, 5, 4]) == (3, 1, 5)
    # a lower level narrows it: n = 9 at 80%, 2 P(B <= 2) = 0.18 <= 0.2: [x3, x7]
    assert stats.median_ci(range(1, 10), level=0.8) == (5, 3, 7)
    # a tail exactly at the level: n = 5 at 62.5%, 2 P(B = 0) = 1/16 < 0.375 and 2 P(B <= 1) = 0.375: [x2, x4]
    assert stats.median_ci(range(1, 6), level=0.625) == (3, 2, 4)


def test_paired_ratios_and_verdicts():
    r = stats.paired_ratios([[2.0, 3.0], [4.0]], [[1.0, 2.0], [8.0]])
    assert r == [2.0, 1.5, 0.5]
    assert stats.verdict(1.02, 1.09, 1.1) == "met"
    assert stats.verdict(1.11, 1.2, 1.1) == "missed"
    assert stats.verdict(1.05, 1.15, 1.1) == "inside noise"
    assert stats.format_ci(1.0812, 1.03, 1.125) == "1.08x [1.03-1.12]"


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="round 1 has 1 reps against 2"):
        stats.paired_ratios([[1.0], [1.0]], [[1.0], [1.0, 2.0]])
    with pytest.raises(ValueError, match="round 0, rep 1 is not positive"):
        stats.paired_ratios([[1.0, 1.0]], [[1.0, 0.0]])
    with pytest.raises(ValueError, match="time nan at round 0, rep 0"):
        stats.paired_ratios([[float("nan")]], [[1.0]])
    with pytest.raises(ValueError, match="no values"):
        stats.median_ci([])
    with pytest.raises(ValueError, match="level"):
        stats.median_ci([1.0], level=1.0)


def test_rep_order_is_a_seeded_shuffle():
    names = ["all_reduce", "ring", "nccl-tree", "ring-direct"]
    orders = [stats.rep_order(names, 0, rep) for rep in range(40)]
    assert all(sorted(o) == sorted(names) for o in orders)
    assert stats.rep_order(names, 0, 3) == orders[3]            # every rank computes the same order
    # no method always follows the same one (the rotating order's flaw)
    before_ring = {o[o.index("ring") - 1] for o in orders if o.index("ring") > 0}
    assert len(before_ring) == 3


def test_band_verdict_reads_a_ratio_against_one_plus_minus_tol():
    assert stats.band_verdict(0.998, 1.004, 0.005) == "met"
    assert stats.band_verdict(0.995, 1.005, 0.005) == "met"            # the band's edges are in it
    assert stats.band_verdict(0.990, 1.001, 0.005) == "inside noise"
    assert stats.band_verdict(1.006, 1.02, 0.005) == "missed"
    assert stats.band_verdict(0.97, 0.994, 0.005) == "missed"


def test_segment_pairs_leaves_out_each_segments_first_epoch():
    # 3 rounds of segments of 3: arm A's epochs are 0..8, arm B's 10..18; round 0 skipped
    a, b = list(range(9)), list(range(10, 19))
    assert stats.segment_pairs(a, b, 3, skip=1) == ([4, 5, 7, 8], [14, 15, 17, 18])
    assert stats.segment_pairs(a, b, 3) == ([1, 2, 4, 5, 7, 8], [11, 12, 14, 15, 17, 18])
    with pytest.raises(ValueError, match="not whole segments of 4"):
        stats.segment_pairs(a, b, 4)
    with pytest.raises(ValueError, match="9 and 8 epochs"):
        stats.segment_pairs(a, b[:8], 3)
    assert stats.segment_pairs(a, b, 3, skip=2, drop=0) == ([6, 7, 8], [16, 17, 18])
    assert stats.segment_pairs(a[:3], b[:3], 1, drop=0) == ([0, 1, 2], [10, 11, 12])   # epoch by epoch
    with pytest.raises(ValueError, match="drop 1 leaves no epoch of a segment of 1"):
        stats.segment_pairs(a, b, 1)
    with pytest.raises(ValueError, match="skip 3 is not in 0..2"):
        stats.segment_pairs(a, b, 3, skip=3)

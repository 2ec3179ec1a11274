"""``reactccl simulate`` on the SP-allreduce fabrics (torus, HyperX, spine-leaf) and ``--pack``,
with epoch times computed by hand: a flow of b bytes over h links takes b*8/C + h*lat when it
has its links to itself."""

import json

import pytest

from reactccl.cli.main import main

US = 1e-6
C, LAT = 400e9, 400e-9  # fabric defaults, SP-allreduce §7.1


def _run(capsys, *argv):
    assert main(["simulate", *argv, "-e", "1", "--ecmp-ports", "1", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_ring_on_torus_4x4_row_is_one_hop_per_step(capsys):
    # ranks 0..3 on n0..n3, row 0 of the torus: every ring edge is one +dim1 hop (n3 -> n0 wraps);
    # 2(N-1) = 6 steps of S/4 each
    d = _run(capsys, "-a", "ring", "-n", "4", "-t", "torus:4x4", "-s", "1MB")
    assert d["topology"] == "torus:4x4" and d["hosts"] == 16
    assert d["durations_s"] == [pytest.approx(6 * (0.25e6 * 8 / C + LAT), rel=1e-9)]  # 32.4 us


def test_ring_on_whole_torus_4x4_hand_computed(capsys):
    # 16 ranks on n0..n15: edges 3->4, 7->8, 11->12, 15->0 change rows and take 2 hops
    # (dimension order: +dim0 then +dim1), the other 12 take 1; all 16 routes use distinct
    # links. A chunk crosses 30 consecutive ring edges, at most 4 + 4 of them 2-hop ones:
    # T = 30 * (S/16 * 8 / C) + (22 * 1 + 8 * 2) * LAT = 60 us + 15.2 us
    d = _run(capsys, "-a", "ring", "-n", "16", "-t", "torus:4x4", "-s", "1.6MB")
    assert d["durations_s"] == [pytest.approx(30 * (0.1e6 * 8 / C) + 38 * LAT, rel=1e-9)]  # 75.2 us


def test_ring_on_hyperx_and_spineleaf(capsys):
    # HyperX 4x4: same placement, 3->4 and 15->0 differ in both coordinates (2 hops), 7->8 and
    # 11->12 too; the rest 1 hop: the same 75.2 us as the torus
    d = _run(capsys, "-a", "ring", "-n", "16", "-t", "hyperx:4x4", "-s", "1.6MB")
    assert d["durations_s"] == [pytest.approx(30 * (0.1e6 * 8 / C) + 38 * LAT, rel=1e-9)]
    # spine-leaf 2 leaves x 2 hosts at 100G/1us, ranks on n0 (leaf 0) and n2 (leaf 1): both
    # flows cross 4 links through spine 0 (each sender's host index is 0), on disjoint links:
    # 2 steps of 0.5 MB: 2 * (40 us + 4 us)
    d = _run(capsys, "-a", "ring", "-n", "2", "-t", "spineleaf:2x2,rate=100G,latency=1us", "-s", "1MB",
             "--placement", "0,2")
    assert d["topology"] == "spineleaf:2x2,rate=100G,latency=1us"
    assert d["durations_s"] == [pytest.approx(88 * US, rel=1e-9)]


def test_pack_sp_allreduce_on_torus_3x3(capsys):
    # SP-allreduce on T_3^2: 36 chunk graphs (4 trees per root), each 8 reduce + 8 broadcast
    # flows: 576 flows in 2H = 4 rounds. Packed: one message per directed link (9 * 4) and
    # round = 144 flows of 4 chunks = S/9 each; T = 4 * (S/9 * 8 / C + LAT) either way
    want = 4 * (0.2e6 * 8 / C + LAT)  # 17.6 us
    d = _run(capsys, "-a", "sp-allreduce", "-n", "9", "-t", "torus:3x3", "-s", "1.8MB")
    assert (d["flows_per_epoch"], d["durations_s"]) == (576, [pytest.approx(want, rel=1e-9)])
    d = _run(capsys, "-a", "sp-allreduce", "-n", "9", "-t", "torus:3x3", "-s", "1.8MB", "--pack")
    assert (d["flows_per_epoch"], d["durations_s"]) == (144, [pytest.approx(want, rel=1e-9)])
    assert d["algorithm"].endswith("packed")


def test_unknown_fabric_shape_is_a_clean_error(capsys):
    assert main(["simulate", "-a", "ring", "-n", "4", "-t", "torus:1x8", "-e", "1"]) == 2
    assert "every torus side must be >= 3" in capsys.readouterr().err

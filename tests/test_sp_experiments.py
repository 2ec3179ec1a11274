"""Packing, goodput sweeps and the sp CLI on small fabrics (model engine and simulator)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.torus_common import pack
from reactccl.cli.main import main
from reactccl.cost.deficiency import deficiency
from reactccl.experiments.sp_goodput import Fabric, goodput_sweep
from reactccl.pattern import verify
from reactccl.topology.torus import TorusGeometry


def test_pack_keeps_semantics_and_loads():
    pat = generate("sp-allreduce", 16)
    packed = pack(pat)
    verify(packed)
    # one message per directed link and round: 8 rounds x 64 links
    assert packed.num_flows == 8 * 64
    g = TorusGeometry((4, 4))
    a, b = deficiency(pat, g), deficiency(packed, g)
    assert a.max_load == pytest.approx(b.max_load) and a.q == pytest.approx(b.q)


def test_model_goodput_sp_bandwidth_bound():
    run = goodput_sweep(Fabric("torus", (4, 4)), ["SP", "Bucket"], sizes=[1 << 30], engine="model", log=None)
    sp = next(r for r in run.best if r["family"] == "SP")
    # Ω = 1: T = 2(p-1)/(p D) N / B + 2H hops, so G -> B_v/2 for large N
    assert sp["fraction"] == pytest.approx(1.0, abs=1e-3)
    assert run.meta["bound"] == 4 * 400e9 / 2


def test_netsim_goodput_small_torus():
    run = goodput_sweep(Fabric("torus", (4, 4)), ["SP", "Bucket"], sizes=[64 * 1024], engine="netsim", log=None)
    g = {r["family"]: r["goodput"] for r in run.best}
    # at 64 KiB hop latency dominates: SP's 8 rounds beat Bucket's 12
    assert g["SP"] > g["Bucket"]


def test_cli_metrics_and_goodput(tmp_path, capsys):
    assert main(["sp", "metrics", "bucket", "--fabric", "torus:5x5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rounds"] == 16 and doc["psi"] == pytest.approx(1)
    assert main(["sp", "goodput", "sp-hyperx", "--shape", "4x4", "--engine", "model", "--sizes", "1MiB",
                 "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "sp-hyperx-enginemodel-shape4x4-sizes1MiB.json").read_text())
    assert out["experiment"] == "sp-hyperx" and (tmp_path / "sp-hyperx-enginemodel-shape4x4-sizes1MiB.png").exists()
    assert main(["sp", "metrics", "swing-b", "--fabric", "torus:5x5", "--option", "k=2"]) == 2  # no such option


def test_cli_ksp_table(capsys):
    assert main(["sp", "ksp", "--fabric", "torus:8x8", "--ks", "1,2,8"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {int(line.split()[0]): line.split() for line in out[2:]}
    assert rows[1][1:4] == ["1", "2", "256"]   # depth, rounds, W(T) of the star
    assert rows[2][1:4] == ["2", "4", "139"]
    assert rows[8][1:5] == ["8", "16", "63", "1.000"]


def test_pack_groups_keep_instances_apart():
    # on 4 x 3 the instances (0,+) and (1,+) both use +x links at step 2: packing all would merge them
    pat = generate("bucket", 12, shape=(4, 3))  # 4 instances of 12 chunks
    whole, split = pack(pat), pack(pat, np.arange(pat.num_chunks) // 12)
    verify(split)
    assert split.num_flows > whole.num_flows
    # within one instance every (step, src, dst) is one message
    key = (split.step * 12 + split.src) * 12 + split.dst
    inst = split.chunk_idx[split.chunk_ptr[:-1]] // 12
    assert len(np.unique(key * 4 + inst)) == split.num_flows


def test_spineleaf_netsim_routes_by_sender_spine_like_the_model():
    # 4 leaves x 4 hosts: the star schedule sends 15/16 of N through each host link in each of
    # its 2 rounds, 4 hops of 400 ns each; with the sender's spine nothing collides, so the
    # simulator and the model agree on T = 2 (15/16 N 8 / C + 4 h)
    from reactccl.experiments.sp_goodput import Fabric, goodput_sweep
    N = 1024 * 1024
    want = 2 * (15 / 16 * N * 8 / 400e9 + 4 * 400e-9)
    for engine in ("netsim", "model"):
        run = goodput_sweep(Fabric("spineleaf", (4, 4)), ["SP"], [N], engine=engine, log=None)
        assert run.best[0]["time"] == pytest.approx(want, rel=1e-9), engine


# --- issue 5 review: goodput experiments -------------------------------------------------

from reactccl.experiments import sp_figures, sp_goodput  # noqa: E402
from reactccl.experiments.sp_figures import panel_title, run_experiment  # noqa: E402
from reactccl.experiments.sp_goodput import default_netsim_ks, torus_ks  # noqa: E402

MIB = 1 << 20


def _report(name, tmp_path, **kw):
    text = run_experiment(name, tmp_path, log=None, **kw)
    path = re.search(r"wrote (\S+\.json) and", text).group(1)   # named by its settings (outputs.result_stem)
    return text, json.loads(Path(path).read_text())


def test_summary_without_baseline_or_without_sp(tmp_path):
    for fams, word in ((["SP"], "no SP and baseline"), (["Bucket"], "no SP and baseline")):
        text, doc = _report("sp-rect", tmp_path, quick=True, engine="model", families=fams)
        assert word in text
        assert {r["family"] for r in doc["runs"][0]["best"]} == set(fams)  # --families honoured
    text, doc = _report("sp-square", tmp_path, quick=True, engine="model", families=["Bucket"])
    assert {r["family"] for r in doc["runs"][0]["best"]} == {"Bucket"}


def test_ks_always_include_the_bfs_tree():
    assert torus_ks((8, 8), [1, 2, 4]) == [1, 2, 4, 8]
    assert torus_ks((4, 4), [9, 2, 2]) == [2, 4]  # k > H is the BFS tree
    assert torus_ks((4, 4)) == [1, 2, 3, 4]
    with pytest.raises(ValueError, match=">= 1"):
        torus_ks((4, 4), [0])
    assert default_netsim_ks((32, 32)) == [1, 2, 8, 16, 32]


def test_quick_with_sides_uses_that_torus_ks_and_paper_size(tmp_path):
    text, doc = _report("sp-square", tmp_path, quick=True, sides=[8], sizes=[256 * MIB], engine="model")
    (run,) = doc["runs"]
    assert run["meta"]["ks"] == [1, 2, 3, 4, 5, 6, 7, 8]
    # SP on 8x8: 16 rounds of 1 hop each, Q = 2(p-1)/(4p) N over 400 Gb/s links
    N = 256 * MIB
    T = 16 * 400e-9 + 2 * 63 / (4 * 64) * N * 8 / 400e9
    best = {r["family"]: r for r in run["best"]}
    assert best["SP"]["time"] == pytest.approx(T, rel=1e-9)
    assert best["k-SP"]["goodput"] == pytest.approx(best["SP"]["goodput"], rel=1e-12)  # k = H is SP
    assert "SP/Bucket at 64 KiB" not in text and "1.74" not in text.split("paper (SST")[0]
    assert "size not run here" in text


def test_auto_names_each_panel_engine_and_notes_ksp_difference(tmp_path, monkeypatch):
    monkeypatch.setattr(sp_goodput, "VERIFY_LIMIT", 16)  # 4x4 by netsim, 5x5 by the model
    text, doc = _report("sp-square", tmp_path, sides=[4, 5], sizes=[MIB], engine="auto", families=["SP"])
    assert doc["engines"] == ["netsim", "model"]
    assert [r["meta"]["engine"] for r in doc["runs"]] == ["netsim", "model"]
    assert "torus 5x5  (goodput Gb/s; bound 800 Gb/s; engine model)" in text
    assert "netsim overlaps" not in text and "overlaps rounds" in text
    run = sp_goodput.goodput_sweep(sp_goodput.Fabric("torus", (4, 4)), ["SP"], [MIB], engine="model", log=None)
    assert panel_title(run) == "torus 4x4, 400 Gb/s, 400 ns (model)"


def test_rect_model_bucket_caveat(tmp_path):
    text, _ = _report("sp-rect", tmp_path, quick=True, engine="model")
    assert "caveat: Bucket on the rectangular 8x4 comes from the round-synchronous model" in text
    text, _ = _report("sp-rect", tmp_path, quick=True, engine="netsim", sizes=[MIB])
    assert "caveat: Bucket" not in text


def test_spineleaf_reports_where_sp_loses_and_quick(tmp_path):
    text, doc = _report("sp-spineleaf", tmp_path, quick=True, engine="model")
    s = doc["summary"]["4x4"]
    runs = doc["runs"][0]
    ratios = {}
    for size in {r["size"] for r in runs["best"]}:
        g = {r["family"]: r["goodput"] for r in runs["best"] if r["size"] == size}
        ratios[size] = g["SP"] / max(v for f, v in g.items() if f != "SP")
    low = min(ratios, key=ratios.get)
    assert s["min_ratio"] == pytest.approx(ratios[low]) and s["min_at"] == sp_figures.fmt_size(low)
    assert f"min {ratios[low]:.3f}x at" in text
    assert text.startswith("== sp-spineleaf == (quick run: small fabric and three sizes, not comparable")


def test_baselines_that_cannot_lay_out_are_skipped(tmp_path):
    # 4 leaves x 1 host: the torus baselines need sides >= 3; SP's star is 2 rounds of 3/4 N over
    # the host links and 4 hops (host-leaf-spine-leaf-host)
    text, doc = _report("sp-spineleaf", tmp_path, shape=(4, 1), sizes=[64 * 1024], engine="model")
    run = doc["runs"][0]
    assert "every side must be >= 3" in run["skipped"]["bucket"]
    assert "bucket (bucket with 4 ranks: torus: every side must be >= 3" in text
    T = 2 * (0.75 * 65536 * 8 / 400e9 + 4 * 400e-9)
    sp = next(r for r in run["best"] if r["family"] == "SP")
    assert sp["time"] == pytest.approx(T, rel=1e-9) and sp["goodput"] / 1e9 == pytest.approx(76.11, abs=0.01)


def test_sizes_deduplicated_and_labelled_exactly(tmp_path):
    text, doc = _report("sp-square", tmp_path, sides=[4], engine="model", families=["SP", "k-SP"],
                        sizes=[3, 1536, 100000, 65536, 65536])
    assert sorted({r["size"] for r in doc["runs"][0]["best"]}) == [3, 1536, 65536, 100000]
    assert list(doc["summary"]["4x4"]["best_k"]) == ["3 B", "1.5 KiB", "100 KB", "64 KiB"]
    for label in ("  3 B ", "  1.5 KiB ", "  100 KB ", "  64 KiB "):
        assert label in text
    with pytest.raises(ValueError, match="whole numbers of bytes"):
        sp_goodput.goodput_sweep(sp_goodput.Fabric("torus", (4, 4)), ["SP"], [1.5], engine="model", log=None)


def test_report_text_readable(tmp_path):
    text, _ = _report("sp-latency", tmp_path, quick=True, engine="model", alpha=0.0)
    assert "torus 4x4: k-SP envelope" in text and "gain per size: 64 KiB " in text and "{" not in text
    text, doc = _report("sp-square", tmp_path, quick=True, engine="model")
    # 4x4 is no power of three: trivance-l shrinks it onto 3x3 and runs (6 rounds) instead of being skipped
    assert "not available here" not in text and not doc["runs"][0]["skipped"]
    assert {r["steps"] for r in doc["runs"][0]["rows"] if r["variant"] == "trivance-l"} == {6}
    assert "  SP / Bucket at 64 KiB: 8x8 1.74, 64x64 2.0" in text


def test_netsim_on_large_torus_limits_ks_and_says_so(monkeypatch):
    monkeypatch.setattr(sp_goodput, "VERIFY_LIMIT", 8)  # pretend 4x4 is large
    lines = []
    run = sp_goodput.goodput_sweep(sp_goodput.Fabric("torus", (4, 4)), ["k-SP"], [MIB], engine="netsim",
                                   log=lines.append)
    assert run.meta["ks"] == [1, 2, 4]  # 1, 2, H/4 = 1, H/2 = 2 and H = 4
    assert "--engine auto or model" in lines[0]


def test_model_engine_accepts_zero_alpha_through_cli(tmp_path, capsys):
    assert main(["sp", "goodput", "sp-square", "--quick", "--engine", "model", "--alpha", "0",
                 "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "sp-square-enginemodel-quick.json").read_text())    # alpha 0 is the default
    assert doc["runs"][0]["meta"]["alpha"] == 0.0


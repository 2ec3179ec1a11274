"""The sp CLI's guards and α-β time, and ``reactccl experiment sp-* --quick``."""

import json

import pytest

from reactccl.algorithms import generate
from reactccl.cli.main import main
from reactccl.cli.sp_cmd import estimate_flows
from reactccl.experiments.sp_figures import QUICK


def test_experiment_quick_through_cli(tmp_path, capsys):
    assert main(["experiment", "sp-hyperx", "--quick", "--no-progress", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "sp-hyperx-quick.json").read_text())     # named by its settings
    assert doc["quick"] is True and (tmp_path / "sp-hyperx-quick.png").exists()
    (run,) = doc["runs"]
    assert run["meta"]["fabric"] == "hyperx 4x4"
    assert sorted({r["size"] for r in run["best"]}) == QUICK["sp-hyperx"]["sizes"]
    # SP uses all 6 links of a HyperX 4x4 node, the torus baselines 4: SP wins at 16 MiB
    big = {r["family"]: r["goodput"] for r in run["best"] if r["size"] == 16 << 20}
    assert big["SP"] > max(big["Bucket"], big["Swing"])


def test_experiment_rejects_react_options(tmp_path, capsys):
    assert main(["experiment", "sp-square", "--quick", "--seed", "3", "--epochs", "5", "--out", str(tmp_path)]) == 2
    out = capsys.readouterr().err
    assert "--seed" in out and "--epochs" in out
    assert not (tmp_path / "sp-square.json").exists()


@pytest.mark.parametrize("algorithm, fabric, words", [
    ("sp-allreduce", "spineleaf:4", "LEAVESxQ"), ("sp-allreduce", "hyperx:4x4x4", "NxN"),
    ("torus-ring", "torus:64x64", "would materialise about 1.34e+08 flows")])
def test_metrics_bad_or_huge_fabric_is_an_error(algorithm, fabric, words, capsys):
    assert main(["sp", "metrics", algorithm, "--fabric", fabric]) == 2
    assert words in capsys.readouterr().err


def test_metrics_huge_torus_by_symmetry(capsys):
    # 8^5 = 32768 nodes: 2d p^2 ~ 2.1e10 flows, timed from the 10 point-group trees;
    # S = 2H = 2 * 5 * 4, Q = V_min/|E| = 2(p-1)/(10 p)
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:8x8x8x8x8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["by_symmetry"] and doc["flows"] == 10 * 32768 * 2 * 32767 and doc["rounds"] == 40
    assert doc["q"] == pytest.approx(2 * 32767 / (10 * 32768), rel=1e-12)
    assert (doc["psi"], doc["theta"], doc["omega"]) == pytest.approx((1, 1, 1), rel=1e-12)


def test_metrics_alpha_beta_time(capsys):
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:4x4", "--json", "--size", "1MiB"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # Q = 2(p-1)/(p D) = 30/64 of N; S = 8 rounds; beta*N = 8 * 2^20 / 400e9 s
    assert doc["q"] == pytest.approx(30 / 64)
    assert doc["time_alpha_beta_s"] == pytest.approx(8 * 400e-9 + 30 / 64 * 8 * 2 ** 20 / 400e9)
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:4x4", "--size", "64KiB",
                 "--alpha", "1us", "--link-rate", "100Gbps"]) == 0
    t = 8 * 1e-6 + 30 / 64 * 8 * 65536 / 100e9
    assert f"= {t * 1e6:.4g} us" in capsys.readouterr().out


def test_metrics_refuses_sp_generator_on_wrong_fabric(capsys):
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "hyperx:4x4"]) == 2
    assert "sp-hyperx" in capsys.readouterr().err
    assert main(["sp", "metrics", "sp-spineleaf", "--fabric", "hyperx:4x4"]) == 2
    assert "sp-hyperx" in capsys.readouterr().err
    assert main(["sp", "metrics", "sp-hyperx", "--fabric", "hyperx:4x4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["omega"] == pytest.approx(1)
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "hyperx:4x4", "--force", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "sp-hyperx" in doc["note"] and doc["omega"] == pytest.approx(1.5)
    # baselines are references on every fabric (§7.6): no refusal
    assert main(["sp", "metrics", "bucket", "--fabric", "spineleaf:4x4"]) == 0


@pytest.mark.parametrize("name, shape", [("sp-allreduce", (8, 8)), ("bucket", (4, 4, 4)), ("trivance-b", (9, 9)),
                                         ("swing-l", (8, 8)), ("ring", (8, 8))])
def test_estimate_flows_matches_generators(name, shape):
    p = 1
    for v in shape:
        p *= v
    opts = {} if name == "ring" else {"shape": shape}
    assert estimate_flows(name, p, len(shape)) == generate(name, p, check=False, **opts).num_flows


def test_ksp_and_metrics_memory_limit(capsys):
    assert main(["sp", "ksp", "--fabric", "torus:64x64", "--ks", "1,64"]) == 0  # by symmetry
    out = capsys.readouterr().out
    # k = 1: the star, W(T) = sum of distances from 0 = 64 * 64 * 32 = 131072; Theta = W / (p - 1)
    assert f"    1     1      2  131072 {131072 / 4095:7.3f}" in out
    assert "   64    64    128    4095   1.000   1.000" in out
    assert main(["sp", "ksp", "--fabric", "torus:64x32"]) == 2  # unequal sides: no k-SP trees
    out = capsys.readouterr().err
    assert out.startswith("error:") and "equal sides" in out and "k  depth" not in out
    # 4x4 SP: 2d·2p(p-1) = 1920 flows x 140 B = 268800 B, over a 200 KB limit
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:4x4", "--max-memory", "200KB"]) == 2
    assert "1.92e+03 flows" in capsys.readouterr().err


# --- issue 5 review: the sp CLI's options -------------------------------------------------

B400 = 8 * 2 ** 20 / 400e9  # seconds to send 1 MiB over one 400 Gb/s link


@pytest.mark.parametrize("argv", [["sp", "goodput", "sp-square", "--quick"], ["experiment", "sp-square", "--quick"],
                                  ["experiment", "fig5a", "--quick"]])
@pytest.mark.parametrize("where", ["file", "below-file"])
def test_bad_out_fails_before_running(argv, where, tmp_path, capsys):
    blocker = tmp_path / "f"
    blocker.write_text("x")
    out = blocker if where == "file" else blocker / "x"
    assert main(argv + ["--out", str(out)]) == 2
    text = capsys.readouterr().err
    assert f"--out {out}" in text and "steps" not in text and "==" not in text  # nothing ran


def test_metrics_zero_alpha_and_hop_latency(capsys):
    # 4x4 SP, 1 MiB, alpha = hop = 0: both times are beta*Q = 30/64 of one link's time for N
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:4x4", "--json", "--alpha", "0",
                 "--hop-latency", "0ns"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["time_alpha_beta_s"] == pytest.approx(30 / 64 * B400, rel=1e-12)
    assert doc["time_round_model_s"] == pytest.approx(30 / 64 * B400, rel=1e-12)
    assert main(["sp", "metrics", "sp-allreduce", "--alpha", "abc"]) == 2
    assert "error: --alpha: cannot parse" in capsys.readouterr().err


def test_metrics_round_model_includes_alpha(capsys):
    # 8 rounds, each alpha + 1 hop (BFS edges join neighbours) + its share of Q (Omega = 1)
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:4x4", "--json", "--alpha", "1us",
                 "--hop-latency", "100ns"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["time_round_model_s"] == pytest.approx(8 * (1e-6 + 100e-9) + 30 / 64 * B400, rel=1e-12)
    assert doc["time_alpha_beta_s"] == pytest.approx(8 * 1e-6 + 30 / 64 * B400, rel=1e-12)


@pytest.mark.parametrize("name, rounds", [("binomial-broadcast", 4), ("binomial-reduce", 4), ("ring-allgather", 15),
                                          ("nccl-tree", None)])
def test_metrics_shape_only_to_generators_that_take_it(name, rounds, capsys):
    assert main(["sp", "metrics", name, "--fabric", "torus:4x4", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert rounds is None or doc["rounds"] == rounds  # log2(16) binomial rounds, p-1 ring rounds


def test_metrics_dims_option_must_match_fabric(capsys):
    assert main(["sp", "metrics", "sp-allreduce", "--option", "dims=3"]) == 2
    assert "--option dims=3" in capsys.readouterr().err
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:4x4", "-O", "dims=2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rounds"] == 8


def test_metrics_compact_message_true_for_unequal_sides(capsys):
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:128x32"]) == 2
    out = capsys.readouterr().err
    assert "equal sides only" in out and "on torus 128x32: bucket, swing-b, trivance-b" in out


def test_metrics_rate_needs_unit_and_sizes_whole_bytes(capsys):
    assert main(["sp", "metrics", "sp-allreduce", "--link-rate", "400"]) == 2
    assert "did you mean 400Gbps?" in capsys.readouterr().err
    for size, words in [("1.5", "not a whole number of bytes"), ("1e300", "more than 1 PiB")]:
        assert main(["sp", "metrics", "sp-allreduce", "--size", size]) == 2
        assert f"error: --size: '{size}'" in capsys.readouterr().err and words
    assert main(["sp", "metrics", "sp-allreduce", "--fabric", "torus:4x4", "--size", "1.5KiB"]) == 0
    assert "N = 1.5 KiB (1536 B)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["sp", "ksp", "--fabric", "torus:8x4"], "equal sides"), (["sp", "ksp", "--ks", "0"], "--ks: every value must be >= 1"),
    (["sp", "ksp", "--ks", "2,abc"], "--ks: expected comma-separated integers, got 'abc'"),
    (["sp", "goodput", "sp-square", "--sides", "8,abc"], "--sides: expected comma-separated integers"),
    (["sp", "goodput", "sp-square", "--ks", "0,-3"], "--ks: every value must be >= 1, got 0"),
    (["sp", "goodput", "sp-rect", "--quick", "--sides", "8"], "--sides does not apply to sp-rect; it applies to sp-square"),
    (["sp", "goodput", "sp-square", "--quick", "--shape", "8x8"], "--shape does not apply to sp-square"),
    (["sp", "goodput", "sp-rect", "--values", "1Gbps"], "--values does not apply to sp-rect"),
    (["sp", "goodput", "sp-hyperx", "--ks", "2"], "--ks does not apply to sp-hyperx"),
    (["sp", "goodput", "sp-square", "--sizes", "1.5"], "--sizes: '1.5' is 1.5 bytes")])
def test_bad_options_fail_first_naming_the_option(argv, words, tmp_path, capsys):
    assert main(argv + ["--out", str(tmp_path)] if argv[1] == "goodput" else argv) == 2
    out = capsys.readouterr().err
    assert out.startswith("error: ") and words in out and "depth" not in out and "steps" not in out


def test_experiment_out_gets_name_json_directly(tmp_path, monkeypatch, capsys):
    # --out results used to mean results/sp for the sp-* experiments; now NAME.json lands in --out,
    # and only the default (no --out) is results/sp, where `sp goodput` writes too
    monkeypatch.chdir(tmp_path)
    assert main(["experiment", "sp-hyperx", "--quick", "--no-progress", "--out", "results"]) == 0
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["sp-hyperx-quick.json",
                                                                          "sp-hyperx-quick.png"]
    assert main(["experiment", "sp-hyperx", "--quick", "--no-progress"]) == 0
    doc = json.loads((tmp_path / "results" / "sp" / "sp-hyperx-quick.json").read_text())
    assert doc["experiment"] == "sp-hyperx"


def test_experiment_help_names_every_experiment(capsys):
    from reactccl.experiments import EXPERIMENTS
    from reactccl.experiments.sp_figures import EXPERIMENTS as SP
    with pytest.raises(SystemExit):
        main(["experiment", "--help"])
    text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, also after a hyphen
    assert len(EXPERIMENTS) == 7 and len(SP) == 6
    for name in [*EXPERIMENTS, *SP]:
        assert f"({name}," in text or f",{name}," in text or f",{name})" in text, name
    assert "(default:results;sp-*:results/sp)" in text

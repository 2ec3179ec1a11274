"""Packing, goodput sweeps and the sp CLI on small fabrics (model engine and simulator)."""

import json

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
    out = json.loads((tmp_path / "sp-hyperx.json").read_text())
    assert out["experiment"] == "sp-hyperx" and (tmp_path / "sp-hyperx.png").exists()
    assert main(["sp", "metrics", "swing-l", "--fabric", "torus:5x5"]) == 2


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

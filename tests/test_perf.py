"""``reactccl perf``: nccl-tests' sizes and columns, hand-computed simulator times, and real ranks
(Gloo) where #wrong is a real check."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reactccl.cli.main import main
from reactccl.experiments.perf import format_table, nccl_sizes, parse_nccl_size, sim_sweep

ROOT = Path(__file__).resolve().parents[1]


def test_sizes_like_nccl_tests():
    assert parse_nccl_size("8") == 8 and parse_nccl_size("1K") == 1024 and parse_nccl_size("128M") == 128 << 20
    assert parse_nccl_size("20MB") == 20_000_000 and parse_nccl_size("1G") == 1 << 30
    s = nccl_sizes(8, 128 << 20, 2)
    assert len(s) == 25 and s[0] == 8 and s[-1] == 134217728 and s[1] == 16
    assert nccl_sizes(1000, 4000, step=1000) == [1000, 2000, 3000, 4000]
    with pytest.raises(ValueError, match="-f 1"):
        nccl_sizes(8, 64, 1)


def test_sim_ring_on_a_star_is_alpha_beta():
    # 4 ranks, 4 MB: 6 steps of 1 MB over host->switch->host (2 x 1 us, 100 Gbps): 6 * (2 us + 80 us)
    (r,) = sim_sweep(["ring"], 4, [4_000_000], iters=3, warmup=1, topology="star:hosts=4")
    assert r.time_s == pytest.approx(6 * (2e-6 + 1e6 * 8 / 100e9), rel=1e-9)
    assert r.algbw == pytest.approx(4e6 / r.time_s)
    assert r.busbw == pytest.approx(r.algbw * 2 * 3 / 4)          # nccl-tests: 2(n-1)/n for AllReduce
    assert (r.count, r.type, r.redop, r.root, r.wrong) == (1_000_000, "float", "sum", -1, None)


def test_busbw_factor_of_other_collectives():
    (ag,) = sim_sweep(["ring-allgather"], 4, [4_000_000], iters=1, warmup=0, topology="star:hosts=4")
    assert ag.busbw == pytest.approx(ag.algbw * 3 / 4)
    (bc,) = sim_sweep(["binomial-broadcast"], 4, [4_000_000], iters=1, warmup=0, topology="star:hosts=4")
    assert bc.busbw == pytest.approx(bc.algbw) and bc.root == 0


def test_table_has_nccl_tests_columns():
    rows = sim_sweep(["ring", "nccl-tree"], 4, [8, 1024], iters=1, warmup=0, topology="star:hosts=4")
    text = format_table(rows)
    assert "#       size         count      type   redop    root     time   algbw   busbw #wrong" in text
    assert text.count("# algorithm:") == 2 and text.count("N/A") == 4
    line = [l for l in text.splitlines() if l.strip().startswith("1024")][0].split()
    assert line[:5] == ["1024", "256", "float", "sum", "-1"]


def test_cli_json_and_plot(tmp_path, capsys):
    png = tmp_path / "bw.png"
    assert main(["perf", "-b", "8", "-e", "64K", "-f", "8", "-n", "2", "-w", "1", "-a", "ring,nccl-tree",
                 "--ranks", "4", "--topology", "star:hosts=4", "--json", "--plot", str(png)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "reactccl.perf/1"
    assert [r["size"] for r in doc["rows"]] == [8, 64, 512, 4096, 32768] * 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["perf", "-b", "64", "-e", "8", "-a", "ring"]) == 2
    assert "minbytes <= maxbytes" in capsys.readouterr().err


def _child(rank, world):
    import torch
    from reactccl.experiments.perf import dist_sweep, measure
    rows = dist_sweep(["ring", "nccl-tree"], [1024, 4096], iters=2, warmup=1)
    # a broken "AllReduce" that does nothing: every element is wrong on both ranks
    _, wrong = measure(lambda t: None, 100, torch.float32, torch.device("cpu"), 1, 0)
    # ReactAllReduce from a pattern file (MSCCL XML)
    import reactccl.torch as rt
    ar = rt.ReactAllReduce(pattern=str(ROOT / "tests/data/msccl_halving_doubling_2.xml"), react=False)
    t = torch.full((6,), float(rank + 1))
    ar(t)
    ar.close()
    return [(r.algorithm, r.size, r.wrong) for r in rows], wrong, t.tolist()


@pytest.mark.torch
def test_real_ranks_check_every_element():
    pytest.importorskip("torch")
    from reactccl.runtime.local import run_local
    res = run_local(_child, 2, timeout=180)
    for rows, broken, t in res:
        assert rows == [(a, s, 0) for a in ("ring", "nccl-tree", "dist.all_reduce") for s in (1024, 4096)]
        assert broken == 200
        assert t == [3.0] * 6


@pytest.mark.torch
@pytest.mark.slow
def test_perf_under_torchrun_gloo():
    pytest.importorskip("torch")
    from reactccl.runtime.local import free_port
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), "-m", "reactccl.cli.main", "perf", "-b", "1K", "-e", "4K", "-f", "4",
           "-n", "2", "-w", "1", "-a", "ring", "--backend", "gloo"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "# algorithm: ring (allreduce, 2 ranks)" in out and "# algorithm: dist.all_reduce" in out
    rows = [l.split() for l in proc.stdout.splitlines() if l and not l.startswith("#")]
    assert [(r[0], r[-1]) for r in rows] == [("1024", "0"), ("4096", "0")] * 2
    assert out.count("Out of bounds values : 0 OK") == 2


SIM = ["--ranks", "4", "--topology", "star:hosts=4", "-a", "ring", "-n", "1", "-w", "0"]


@pytest.mark.parametrize("argv, err", [
    (["--engine", "bogus"], "error: --engine bogus: expected one of fluid, compiled, python\n"),
    (["--engine", "packet"], "error: --engine packet: perf runs on the flow-level simulator only (fluid, compiled, "
                             "python); for packet level use `reactccl simulate --engine packet` (needs pip install "
                             "'reactccl[ns3]')\n"),
    # nccl-tests' count = size / wordSize: 7 bytes of double is no element (it printed count 0 and a busbw)
    (["-b", "7", "-e", "7", "-d", "double"], "error: -b/--minbytes 7: smaller than one double element (8 bytes); "
                                             "sizes count whole elements, as in nccl-tests\n"),
    # refused before any rank starts (dist_sweep would refuse it only after init_process_group)
    (["-b", "8", "-e", "8", "-d", "uint64", "--backend", "gloo"],
     "error: -d uint64: not supported on real ranks (use one of float, double, half, bfloat16, int8, uint8, int32, "
     "int64)\n"),
])
def test_cli_refuses_engine_dtype_and_size(argv, err, capsys):
    assert main(["perf", *SIM, *argv]) == 2
    cap = capsys.readouterr()
    assert (cap.out, cap.err) == ("", err)


def test_sim_sizes_are_whole_elements(capsys):
    # 12 B of double is one element: simulated and reported as 8 B, as nccl-tests' count x wordSize
    rows = sim_sweep(["ring"], 4, [12, 16], iters=1, warmup=0, dtype="double", topology="star:hosts=4")
    assert [(r.size, r.count) for r in rows] == [(8, 1), (16, 2)]
    assert main(["perf", *SIM, "--engine", "compiled", "-b", "8", "-e", "8", "--json"]) == 0
    assert [r["count"] for r in json.loads(capsys.readouterr().out)["rows"]] == [2]

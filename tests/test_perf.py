"""``reactccl perf`` as nccl-tests: its sizes, counts and columns (out of place, then in place), its
flags' meanings, every collective with its busbw factor, hand-computed simulator times, CSV and JSON,
NCCL's tree slicing by default, and real ranks (Gloo) where #wrong is a real check."""

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reactccl.cli.main import main
from reactccl.experiments.perf import collective_of, combine_times, nccl_count, nccl_sizes, parse_nccl_size, sim_sweep
from reactccl.experiments.perf_format import fit, format_csv, format_table
from reactccl.pattern import Collective, PatternError

ROOT = Path(__file__).resolve().parents[1]
STAR = ["--ranks", "4", "--topology", "star:hosts=4", "-n", "1", "-w", "0"]


def test_sizes_like_nccl_tests():
    assert parse_nccl_size("8") == 8 and parse_nccl_size("1K") == 1024 and parse_nccl_size("128M") == 128 << 20
    assert parse_nccl_size("20MiB") == 20 << 20 and parse_nccl_size("1G") == 1 << 30
    with pytest.raises(ValueError, match="perf's sizes are binary"):     # 20MB is 20e6 elsewhere: refused here
        parse_nccl_size("20MB")
    s = nccl_sizes(8, 128 << 20, 2)
    assert len(s) == 25 and s[0] == 8 and s[-1] == 134217728 and s[1] == 16
    assert nccl_sizes(1000, 4000, step=1000) == [1000, 2000, 3000, 4000]
    assert nccl_sizes(1000, 4000, 2, step=1000) == [1000, 2000, 4000]       # the factor wins, as in nccl-tests
    with pytest.raises(ValueError, match="-f 1"):
        nccl_sizes(8, 64, 1)


def test_counts_like_nccl_tests():
    # whole elements; allgather/reducescatter/alltoall: each rank's part rounded down to 16 bytes
    assert nccl_count("allreduce", 12, "double", 4) == (8, 1)
    assert nccl_count("allgather", 1024, "float", 4) == (1024, 64)          # 64 floats per rank
    assert nccl_count("alltoall", 100, "float", 4) == (64, 4)               # 25 floats -> 24 -> 4 per 16 B: 4
    assert nccl_count("reducescatter", 8, "float", 4) == (0, 0)
    assert nccl_count("alltoall", 1 << 20, "int8", 3) == (3 * 349520, 349520)
    assert collective_of("all_gather_perf") is Collective.ALLGATHER and collective_of("alltoall") is Collective.ALLTOALL
    assert combine_times([3.0, 1.0, 2.0], 0) == 3.0 and combine_times([3.0, 1.0, 2.0], 1) == 2.0
    assert combine_times([3.0, 1.0, 2.0], 2) == 1.0 and combine_times([3.0, 1.0, 2.0], 3) == 3.0


def test_sim_ring_on_a_star_is_alpha_beta():
    # 4 ranks, 4 MB: 6 steps of 1 MB over host->switch->host (2 x 1 us, 100 Gbps): 6 * (2 us + 80 us)
    (r,) = sim_sweep(["ring"], 4, [4_000_000], iters=3, warmup=1, topology="star:hosts=4")
    assert r.time_s == r.oop_time_s == pytest.approx(6 * (2e-6 + 1e6 * 8 / 100e9), rel=1e-9)
    assert r.algbw == pytest.approx(4e6 / r.time_s)
    assert r.busbw == pytest.approx(r.algbw * 2 * 3 / 4)          # nccl-tests: 2(n-1)/n for AllReduce
    assert (r.count, r.type, r.redop, r.root, r.wrong, r.oop_wrong) == (1_000_000, "float", "sum", -1, None, None)
    assert (r.pattern, r.chunks, r.graphs) == ("ring", 4, 4)


def test_every_collective_and_its_busbw_factor():
    S = 4 << 20
    rows = {}
    for algo in ("ring-allgather", "ring-reducescatter", "binomial-broadcast", "binomial-reduce",
                 "alltoall-pairwise", "alltoall-bruck"):
        (rows[algo],) = sim_sweep([algo], 4, [S], iters=1, warmup=0, topology="star:hosts=4", root=2)
    hop, beta = 2e-6, 8 / 100e9
    ag = rows["ring-allgather"]
    assert ag.time_s == pytest.approx(3 * (hop + S / 4 * beta)) and ag.busbw == pytest.approx(ag.algbw * 3 / 4)
    assert ag.redop == "none" and ag.root == -1 and ag.count == S // 4 // 4
    assert rows["ring-reducescatter"].redop == "sum"
    bc, rd = rows["binomial-broadcast"], rows["binomial-reduce"]
    assert bc.busbw == pytest.approx(bc.algbw) and (bc.root, rd.root, bc.redop, rd.redop) == (2, 2, "none", "sum")
    # binomial broadcast from 2 on 4 ranks, farthest first: 2->0, then 2->3 and 0->1. Step order: 2->3 starts
    # once 2->0 has left (S beta), 0->1 once it has arrived (S beta + hop); so ranks 2 and 3 end at
    # 2 S beta + hop, ranks 0 and 1 at 2 S beta + 2 hop: the mean over ranks (-a 1) is 2 S beta + 1.5 hop
    assert bc.time_s == pytest.approx(2 * S * beta + 1.5 * hop)
    a2a, bruck = rows["alltoall-pairwise"], rows["alltoall-bruck"]
    assert a2a.time_s == pytest.approx(hop + 3 * S / 4 * beta) and a2a.busbw == pytest.approx(a2a.algbw * 3 / 4)
    assert bruck.time_s == pytest.approx(2 * (hop + S / 2 * beta))
    assert (a2a.redop, a2a.count, a2a.size) == ("none", S // 4 // 4, S)


def test_average_mode_combines_ranks():
    # a binomial reduce into 0 on 4 ranks: rank 1 and 3 send at step 0, rank 2 at step 1: every rank's
    # last flow ends after 1 step except 0 and 2 (2 steps); -a 0 (rank 0), 1 (mean 1.5), 2 (1), 3 (2)
    S = 1 << 20
    one = 2e-6 + S * 8 / 100e9
    got = [sim_sweep(["binomial-reduce"], 4, [S], iters=1, warmup=0, topology="star:hosts=4", average=a)[0].time_s
           for a in (0, 1, 2, 3)]
    assert got == pytest.approx([2 * one, 1.5 * one, one, 2 * one])


def test_nccl_tree_chunk_rule():
    from reactccl.algorithms import generate
    from reactccl.algorithms.nccl_chunks import tree_chunk_bytes, tree_slices
    # 512 KiB (4 MiB buffer / 8 steps) halved while a tree gets < 8, 4, 1 x depth chunks (16 ranks: depth 4)
    assert tree_chunk_bytes(128 << 20, 16) == 512 << 10 and tree_slices(128 << 20, 16) == 128
    assert tree_chunk_bytes(20e6, 16) == 256 << 10 and tree_slices(20e6, 16) == 39     # 20e6 // 2^20 = 19 < 32
    assert tree_chunk_bytes(4 << 20, 16) == 128 << 10 and tree_slices(4 << 20, 16) == 16
    assert tree_chunk_bytes(512 << 10, 16) == 64 << 10 and tree_slices(512 << 10, 16) == 4
    assert tree_chunk_bytes(8, 16) == 32 << 10 and tree_slices(8, 16) == 1
    assert tree_slices(20e6, 8) == 39 and tree_slices(1 << 30, 1) == 1024       # depth 0: never halved
    assert generate("nccl-tree", 8, size=20e6).num_chunks == 78
    assert generate("nccl-tree", 8, size=20e6, slices=1).num_chunks == 2         # slices by name wins
    assert generate("nccl-tree", 8).num_chunks == 2                              # no size: one slice per tree
    with pytest.raises(PatternError, match="nccl-tree with 8 ranks: size: expected a finite number of bytes >= 0, "
                                           "got -1.0"):
        generate("nccl-tree", 8, size=-1)


def test_nccl_tree_pipelines_by_default_as_nccl_does():
    rows = sim_sweep(["nccl-tree"], 16, [64 << 10, 4 << 20, 128 << 20], iters=1, warmup=0, topology="fat-tree:k=4")
    # NCCL's tree chunk: 64 KiB -> 1 slice, 4 MiB -> 16 slices of 128 KiB, 128 MiB -> 128 of 512 KiB (per tree)
    assert [(r.pattern, r.chunks) for r in rows] == [("nccl-tree", 2), ("nccl-tree(slices=16)", 32),
                                                      ("nccl-tree(slices=128)", 256)]
    (old,) = sim_sweep(["nccl-tree"], 16, [128 << 20], iters=1, warmup=0, topology="fat-tree:k=4",
                       options={"slices": 1})
    assert old.pattern == "nccl-tree" and rows[-1].busbw > 2.5 * old.busbw      # 3.35 GB/s unpipelined


def test_table_has_nccl_tests_columns_and_fits_long_times():
    rows = sim_sweep(["ring", "nccl-tree"], 4, [8, 1024], iters=1, warmup=0, topology="star:hosts=4")
    text = format_table(rows, "head line")
    assert text.startswith("# head line\n")
    assert ("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw"
            "   busbw  #wrong") in text
    assert "           out-of-place                       in-place" in text
    assert text.count("# algorithm:") == 2 and text.count("N/A") == 8
    line = [ln for ln in text.splitlines() if ln.strip().startswith("1024")][0]
    assert line.split()[:5] == ["1024", "256", "float", "sum", "-1"]
    assert "# algorithm: ring (allreduce, 4 ranks); pattern ring (4 chunks, 4 chunk graphs)" in text
    # nccl-tests' getFloatStr: fewer decimals, then exponent form, never a wider column
    assert fit(105.5, 7) == " 105.50" and fit(20238.17, 7) == "20238.2" and fit(123456789.0, 7) == "1.2e+08"
    assert fit(12.43, 6) == " 12.43" and fit(1234.5, 6) == "1234.5"


def test_cli_json_csv_output_file_and_plot(tmp_path, capsys):
    png, out_csv, out_json = tmp_path / "bw.png", tmp_path / "rows.csv", tmp_path / "rows.json"
    argv = ["perf", "-b", "8", "-e", "64K", "-f", "8", *STAR]
    assert main([*argv, "--json", "--plot", str(png), "-J", str(out_csv)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "reactccl.perf/2"
    assert [r["size"] for r in doc["rows"]] == [8, 64, 512, 4096, 32768] * 2
    assert {"time_s", "algbw", "busbw", "wrong", "oop_time_s", "oop_algbw", "oop_busbw", "oop_wrong",
            "pattern", "chunks", "graphs"} <= set(doc["rows"][0])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = list(csv.reader(io.StringIO(out_csv.read_text())))
    assert table[0][:9] == ["algorithm", "collective", "ranks", "size_B", "count", "type", "redop", "root",
                            "oop_time_us"]
    assert len(table) == 11 and table[1][:4] == ["ring", "allreduce", "4", "8"] and table[1][11] == ""
    assert main([*argv, "--csv", "-J", str(out_json)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("algorithm,collective,ranks,size_B")
    assert json.loads(out_json.read_text())["rows"][0]["algorithm"] == "ring"
    assert main(["perf", "-b", "64", "-e", "8", "--algorithm", "ring"]) == 2
    assert "minbytes <= maxbytes" in capsys.readouterr().err


def test_target_command_on_the_simulator(capsys):
    """The issue's target: ``perf -b 8 -e 128M -f 2 -o sum -d float`` (default 8 ranks on fat-tree k=4)."""
    assert main(["perf", "-b", "8", "-e", "128M", "-f", "2", "-o", "sum", "-d", "float", "-n", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# all_reduce_perf (reactccl perf): simulator, 8 ranks on fat-tree:k=4, seed 0\n"
                          "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 1 "
                          "agg iters: 1 validation: 0 graph: 0\n")
    rows = [ln.split() for ln in out.splitlines() if ln and not ln.startswith("#")]
    assert len(rows) == 50 and all(len(r) == 13 for r in rows)
    assert out.count("# Avg bus bandwidth    : ") == 2
    assert "nccl-tree(slices=128) at 128 MiB" in out


def test_nccl_tests_flags_meanings(capsys):
    # -a 3 (most), -g 1 / -t 1 / -G 0 (what we do anyway), -z 3, -r for a rooted collective
    assert main(["perf", "-b", "1M", "-e", "1M", *STAR, "-a", "3", "-g", "1", "-t", "1", "-G", "0", "-z", "3",
                 "--collective", "broadcast", "-r", "1", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert (row["algorithm"], row["root"], row["redop"]) == ("binomial-broadcast", 1, "none")
    assert main(["perf", "-b", "1M", "-e", "1M", *STAR, "--collective", "reduce", "-r", "4"]) == 2
    assert "-r 4: not a rank of --ranks 4" in capsys.readouterr().err


def _child(rank, world):
    import torch

    from reactccl.experiments.perf_real import dist_op, dist_sweep, measure
    out = {}
    for coll, algos in (("allreduce", ["ring", "nccl-tree"]), ("allgather", ["ring-allgather"]),
                        ("reducescatter", ["ring-reducescatter"]), ("broadcast", ["binomial-broadcast"]),
                        ("reduce", ["binomial-reduce"]), ("alltoall", ["alltoall-pairwise", "alltoall-bruck"])):
        rows = dist_sweep(algos, [1024, 4096], iters=2, warmup=1, root=1)
        out[coll] = [(r.algorithm, r.size, r.oop_wrong, r.wrong) for r in rows]
    # a broken "AllReduce" that does nothing: every element is wrong on both ranks
    op = dist_op(Collective.ALLREDUCE, 100, rank, world, 0)
    op.run = lambda o, i: None
    _, wrong = measure(op, 100, torch.float32, torch.device("cpu"), 1, 0, in_place=False)
    out["broken"] = wrong
    # ReactAllReduce from a pattern file (MSCCL XML)
    import reactccl.torch as rt
    ar = rt.ReactAllReduce(pattern=str(ROOT / "tests/data/msccl_halving_doubling_2.xml"), react=False)
    t = torch.full((6,), float(rank + 1))
    ar(t)
    ar.close()
    out["xml"] = t.tolist()
    return out


@pytest.mark.torch
def test_real_ranks_check_every_element_of_every_collective():
    pytest.importorskip("torch")
    from reactccl.runtime.local import run_local
    res = run_local(_child, 2, timeout=300)
    for out in res:
        sizes = (1024, 4096)
        assert out["allreduce"] == [(a, s, 0, 0) for a in ("ring", "nccl-tree", "dist.all_reduce") for s in sizes]
        assert out["allgather"] == [(a, s, 0, 0) for a in ("ring-allgather", "dist.all_gather_into_tensor")
                                    for s in (1024, 4096)]
        assert out["reducescatter"] == [(a, s, 0, 0) for a in ("ring-reducescatter", "dist.reduce_scatter_tensor")
                                        for s in (1024, 4096)]
        assert out["broadcast"] == [(a, s, 0, 0) for a in ("binomial-broadcast", "dist.broadcast") for s in sizes]
        assert out["reduce"] == [(a, s, 0, 0) for a in ("binomial-reduce", "dist.reduce") for s in (1024, 4096)]
        # torch's in-place all_to_all_single is timed, not checked (nccl-tests does not check in-place alltoall)
        assert out["alltoall"] == [(a, s, 0, 0) for a in ("alltoall-pairwise", "alltoall-bruck") for s in sizes] \
            + [("dist.all_to_all_single", s, 0, None) for s in sizes]
        assert out["broken"] == 200
        assert out["xml"] == [3.0] * 6


@pytest.mark.torch
@pytest.mark.slow
def test_perf_under_torchrun_gloo():
    """The issue's target command under torchrun (sizes cut to 4K: Gloo on 2 shared cores)."""
    pytest.importorskip("torch")
    from reactccl.runtime.local import free_port
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), "-m", "reactccl.cli.main", "perf", "-b", "8", "-e", "4K", "-f", "8",
           "-o", "sum", "-d", "float", "-n", "2", "--algorithm", "ring", "--backend", "gloo"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "# algorithm: ring (allreduce, 2 ranks)" in out and "# algorithm: dist.all_reduce" in out
    rows = [ln.split() for ln in proc.stdout.splitlines() if ln and not ln.startswith("#")]
    assert [(r[0], r[8], r[12]) for r in rows] == [("8", "0", "0"), ("64", "0", "0"), ("512", "0", "0"),
                                                   ("4096", "0", "0")] * 2
    assert out.count("Out of bounds values : 0 OK") == 2


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
    assert main(["perf", *STAR, "--algorithm", "ring", *argv]) == 2
    cap = capsys.readouterr()
    assert (cap.out, cap.err) == ("", err)


def test_sim_sizes_are_whole_elements(capsys):
    # 12 B of double is one element: simulated and reported as 8 B, as nccl-tests' count x wordSize
    rows = sim_sweep(["ring"], 4, [12, 16], iters=1, warmup=0, dtype="double", topology="star:hosts=4")
    assert [(r.size, r.count) for r in rows] == [(8, 1), (16, 2)]
    assert main(["perf", *STAR, "--algorithm", "ring", "--engine", "compiled", "-b", "8", "-e", "8", "--json"]) == 0
    assert [r["count"] for r in json.loads(capsys.readouterr().out)["rows"]] == [2]
    # csv of an unchecked row: empty #wrong columns
    assert format_csv(rows).splitlines()[1].split(",")[11] == ""

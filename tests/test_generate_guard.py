"""Sizes checked before work (issue 11): generators and by-symmetry sweeps are refused up front
with the estimate named, and the estimates bound what is really built / allocated."""

import tracemalloc

import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.compact import compact_schedule, tree_route_links
from reactccl.algorithms.sizes import generate_bytes, pattern_size
from reactccl.cli.main import main
from reactccl.cost.symmetric import compact_deficiency, route_bytes
from reactccl.pattern import PatternError
from reactccl.topology.torus import TorusGeometry

SIZED = [("binomial-broadcast", 13, {}), ("binomial-reduce", 16, {}), ("nccl-tree", 12, {}),
         ("nccl-tree", 8, {"slices": 3}), ("rd-allreduce", 16, {}), ("recursive-doubling", 12, {}),
         ("ring-allgather", 9, {}), ("ring-reducescatter", 9, {}), ("ring", 10, {}), ("rabenseifner", 12, {}),
         ("sp-spineleaf", 16, {"q": 4}), ("bucket", 25, {}), ("k-sp-allreduce", 25, {"k": 1}),
         ("sp-allreduce", 16, {}), ("sp-allreduce-2h1", 16, {}), ("sp-hyperx", 16, {}), ("swing-b", 16, {}),
         ("torus-ring", 16, {}), ("trivance-b", 9, {}), ("swing-l", 16, {}), ("trivance-l", 9, {}),
         ("bucket", 64, {"shape": (4, 4, 4)}), ("swing-l", 64, {"shape": (4, 4, 4)}),
         ("nccl-tree", 16, {"size": float(128 << 20)}), ("alltoall-pairwise", 9, {"channels": 2}),
         ("alltoall-bruck", 13, {}), ("alltoall-bruck", 8, {"channels": 3})]


@pytest.mark.parametrize("name,n,opts", SIZED, ids=[f"{a}-{b}-{len(c)}" for a, b, c in SIZED])
def test_size_formula_bounds_the_generated_pattern(name, n, opts):
    p = generate(name, n, check=False, **opts)
    chunks, pairs = pattern_size(name, n, opts)
    assert p.num_chunks <= chunks and len(p.chunk_idx) <= pairs
    assert pairs <= 2 * len(p.chunk_idx) + 4 * n, "the estimate should stay close (within 2x)"


def test_every_registered_generator_has_a_size_formula():
    from reactccl.algorithms import names
    assert [n for n in names() if pattern_size(n, 16, {}) is None] == []


@pytest.mark.parametrize("name,n", [("ring", 128), ("recursive-doubling", 128), ("bucket", 64), ("nccl-tree", 1024)])
def test_generate_estimate_bounds_the_measured_peak(name, n):
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    generate(name, n)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    est = generate_bytes(name, n, {})
    assert peak <= est <= 8 * peak + (2 << 20), (peak, est)


@pytest.mark.parametrize("n,gib", [(100_000, "229.4 TiB"), (10_000, "253.6 GiB")])
def test_pattern_generate_ring_refused_before_generating(capsys, n, gib):
    with pytest.raises(PatternError, match=f"ring with {n} ranks: .* need about {gib} to generate and verify "
                                           r"\(limit 4\.0 GiB\); refused before generating"):
        generate("ring", n)
    assert main(["pattern", "generate", "ring", "--ranks", str(n), "-o", "/dev/null"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and gib in err[0] and "refused before generating" in err[0]
    # the limit is a parameter: a small one refuses a small ring
    with pytest.raises(PatternError, match="ring with 64 ranks: .*limit 1 MiB"):
        generate("ring", 64, max_bytes=1 << 20)


@pytest.mark.parametrize("name,opts", [("k-sp-allreduce", {"k": 1}), ("k-sp-allreduce", {"k": 3}),
                                       ("sp-allreduce", {}), ("bucket", {}), ("swing-b", {})])
def test_compact_route_estimate_bounds_the_measured_peak(name, opts):
    cs = compact_schedule(name, 30 * 30, shape=(30, 30), **opts)
    links, est = route_bytes(cs)
    if name in ("k-sp-allreduce", "sp-allreduce"):
        assert links == tree_route_links(TorusGeometry((30, 30)), opts.get("k"))
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    compact_deficiency(cs)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    assert peak <= est <= 4 * peak + (2 << 20), (peak, est)
    with pytest.raises(PatternError, match=f"{name}.*transversal flows route over {links:,} links"):
        compact_deficiency(cs, max_bytes=est - 1)


@pytest.mark.parametrize("argv", [["sp", "ksp", "--fabric", "torus:1000x1000"],
                                  ["sp", "goodput", "sp-square", "--sides", "1000", "--engine", "model"]])
def test_sp_sweeps_on_huge_tori_refused_up_front(capsys, argv, tmp_path):
    if argv[1] == "goodput":
        argv = argv + ["--out", str(tmp_path)]
    assert main(argv) == 2
    cap = capsys.readouterr()
    msg = (cap.out + cap.err).strip().splitlines()
    assert "Traceback" not in cap.err
    assert any("k-SP k=1 on torus 1000x1000: its transversal routes cover 4,000,000,000 links, about 417.2 GiB"
               in line and "refused before starting" in line for line in msg), msg


def test_tree_sweep_time_is_bounded_before_work(monkeypatch):
    from reactccl.cli.sp_cmd import _fabric
    from reactccl.experiments import sp_goodput
    from reactccl.experiments.sp_goodput import check_tree_sweep
    fab = _fabric("torus:256x256")
    with pytest.raises(PatternError, match="k=1 on torus 256x256: .* GiB"):
        check_tree_sweep(fab, [1, 2, 3, 4, 5])                    # memory first (the smallest k's routes)
    check_tree_sweep(fab, [1, 2, 3, 4, 5], max_bytes=1 << 40)     # 145 M route links in all: allowed
    monkeypatch.setattr(sp_goodput, "MAX_SWEEP_LINKS", 100_000_000)
    with pytest.raises(PatternError, match=r"k-SP sweep over k = 1, 2, 3, 4, 5 on torus 256x256: its routes cover 146,213,760 links in all, about 1 min"):
        check_tree_sweep(fab, [1, 2, 3, 4, 5], max_bytes=1 << 40)  # memory allowed: time still bounded


DIMS = ["bucket", "k-sp-allreduce", "sp-allreduce", "sp-allreduce-2h1", "swing-b", "swing-l", "trivance-b",
        "trivance-l"]


@pytest.mark.parametrize("name", DIMS)
@pytest.mark.parametrize("dims", ["0", "-2"])
def test_dims_below_one_is_named(name, dims, capsys):
    # dims=0 used to divide by zero (a traceback); dims=-2 spoke of a "-2-D torus"
    with pytest.raises(PatternError, match=f"^{name} with 16 ranks: option dims: expected an integer >= 1 "
                                           rf"\(torus dimensions\), got {dims}$"):
        generate(name, 16, dims=int(dims))
    assert main(["pattern", "generate", name, "--ranks", "16", "-O", f"dims={dims}"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {name} with 16 ranks: option dims: expected an integer >= 1 (torus dimensions), got {dims}\n"

"""verify's memory estimate is honest (tracemalloc) and refused before work; wide and long
patterns verify correctly (their timings are in bench/bench_verify.py)."""

import tracemalloc

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.cli.main import main
from reactccl.pattern import CollectivePattern, PatternError, VerificationError, dumps, verify, verify_bytes


def no_flows(coll, n, c):
    root = 0 if coll in ("broadcast", "reduce") else None
    return CollectivePattern.from_arrays(coll, n, np.full(c, 1.0 / c), np.zeros(c, np.int64), [], [], [], [],
                                         [0], [], root=root)


def same_step(f, n=2, coll="allreduce", root=None):
    """``f`` identical reduces 0 -> 1 of the one chunk, all at step 0 (rejected: double count)."""
    z = np.zeros(f, np.int64)
    return CollectivePattern.from_arrays(coll, n, [1.0], [0], z, z, z + 1, z.astype(np.int8),
                                         np.arange(f + 1), z, root=root)


def long_chain(t):
    """A valid 2-rank AllReduce in ``t`` steps: one reduce, then the sum copied back and forth."""
    src = np.arange(t) % 2
    op = np.ones(t, np.int8)
    op[0] = 0
    return CollectivePattern.from_arrays("allreduce", 2, [1.0], [0], np.arange(t), src, 1 - src, op,
                                         np.arange(t + 1), np.zeros(t, np.int64))


def one_wide_step(n, c):
    r, ch = np.repeat(np.arange(n), c), np.tile(np.arange(c), n)
    return CollectivePattern.from_arrays("allreduce", n, np.full(c, 1.0 / c), np.zeros(c, np.int64),
                                         np.zeros(n * c, np.int64), r, (r + 1) % n, np.zeros(n * c, np.int8),
                                         np.arange(n * c + 1), ch)


def _estimate(p):
    pf = p.pair_flow
    widest = int(np.bincount(p.step[pf]).max()) if len(pf) else 0
    return verify_bytes(p.num_ranks, p.num_chunks, len(pf), widest, p.collective)


def _peak(p):
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        verify(p)
    except VerificationError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return peak


CASES = [no_flows(c, 200, 400) for c in ("allreduce", "allgather", "reducescatter", "broadcast", "reduce")]
CASES += [no_flows("allgather", 130, 260), same_step(50_000), same_step(20_000, 300), one_wide_step(300, 200)]
CASES += [generate(n, 128, check=False) for n in ("ring", "recursive-doubling", "rabenseifner", "nccl-tree")]


@pytest.mark.parametrize("p", CASES, ids=lambda p: f"{p.collective.value}-{p.num_ranks}x{p.num_chunks}-{p.num_flows}")
def test_estimate_bounds_the_measured_peak(p):
    est, peak = _estimate(p), _peak(p)
    assert peak <= est, f"peak {peak / 2**20:.1f} MiB above the estimate {est / 2**20:.1f} MiB"
    assert est <= 3.5 * peak + (1 << 20), f"estimate {est / 2**20:.1f} MiB vs peak {peak / 2**20:.1f} MiB"


def test_2048_ranks_4096_chunks_refused_before_allocating(tmp_path, capsys):
    # the 200 KB file: it peaked at 6.9 GB (allreduce) / 9.0 GB (allgather) behind a 4 GiB guard
    for coll in ("allreduce", "allgather"):
        p = no_flows(coll, 2048, 4096)
        assert verify_bytes(2048, 4096, collective=coll) > 4 << 30
        tracemalloc.start()
        with pytest.raises(PatternError, match=r"2048 ranks x 4096 chunks .* needs about 4\.2\d GiB \(limit 4\.00 GiB\)"):
            verify(p)
        assert tracemalloc.get_traced_memory()[1] < 64 << 20   # refused before the state was allocated
        tracemalloc.stop()
        f = tmp_path / f"{coll}.json"
        f.write_text(dumps(p))
        assert f.stat().st_size < 300_000
        assert main(["pattern", "verify", str(f)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "needs about 4.2" in err[0], err


def test_many_reduces_into_one_target_in_one_step():
    with pytest.raises(VerificationError, match="rank 1, chunk 0: contribution of rank 0 counted twice") as e:
        verify(same_step(100_000, coll="reduce", root=1))
    assert "first double count arose at step 0: flow 1 (0->1)" in str(e.value)
    # k distinct contributions into one target in one step add up exactly once each
    n = 70
    src = np.arange(1, n)
    z = np.zeros(n - 1, np.int64)
    b = CollectivePattern.from_arrays("reduce", n, [1.0], [0], z, src, z, z.astype(np.int8), np.arange(n), z, root=0)
    verify(b)
    with pytest.raises(VerificationError, match=r"rank 0, chunk 0: contribution of rank 64 counted twice .*"
                                                r"arose at step 0: flow 64 \(64->0\)"):
        verify(b.replace(src=np.where(src == 65, 64, src)))   # 64 sends twice in the step (65 never)


def test_long_chain_verifies_and_one_wrong_step_is_found():
    p = long_chain(3000)
    verify(p)
    op = p.op.copy()
    op[1700] = 0
    with pytest.raises(VerificationError, match="counted twice"):
        verify(p.replace(op=op))

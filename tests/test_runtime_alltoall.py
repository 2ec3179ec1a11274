"""RAllToAll on real Gloo process groups: every AllToAll generator bit-exact against
``dist.all_to_all_single`` on 2, 3 and 4 ranks, in and out of place, and a trace whose sizes
are nccl-tests' (one group per rank count; the children return plain data)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from reactccl.algorithms import generate  # noqa: E402
from reactccl.runtime.alltoall import RAllToAll  # noqa: E402
from reactccl.runtime.local import run_local  # noqa: E402

pytestmark = pytest.mark.torch

CASES = [("alltoall-pairwise", {}), ("alltoall-pairwise", {"order": "shift"}),
         ("alltoall-pairwise", {"order": "nccl", "channels": 2}), ("alltoall-bruck", {}),
         ("alltoall-bruck", {"channels": 3})]


def _child(rank, world):
    out = []
    for name, opts in CASES:
        a2a = RAllToAll(generate(name, world, **opts), timeout=60)
        for m, dtype in ((1, torch.float32), (5, torch.float32), (1000, torch.float64), (37, torch.int32),
                         (4096, torch.bfloat16)):
            g = torch.Generator().manual_seed(100 * rank + m)
            x = (torch.randn(world * m, generator=g) * 1e3).to(dtype) if dtype.is_floating_point else \
                torch.randint(-10**6, 10**6, (world * m,), generator=g, dtype=dtype)
            x0 = x.clone()
            ref = torch.empty_like(x)
            dist.all_to_all_single(ref, x)
            y = torch.full_like(x, -7)
            a2a(y, x)
            same = bool(torch.equal(y.view(torch.int8 if dtype == torch.bfloat16 else dtype),
                                    ref.view(torch.int8 if dtype == torch.bfloat16 else dtype)))
            z = x.clone()
            a2a(z, z)                                 # in place
            out.append((name, str(opts), m, str(dtype), same, bool(torch.equal(z, ref)), bool(torch.equal(x, x0))))
        trace = a2a.gather_trace()
        out.append((name, "trace", trace.message_bytes, float(trace.flow_bytes.sum()), trace.pattern.num_flows))
        a2a.close()
    try:
        a2a = RAllToAll(generate("alltoall-bruck", world))
        a2a(torch.zeros(world + 1), torch.zeros(world + 1))
    except ValueError as e:
        out.append(("error", str(e)))
    try:
        RAllToAll(generate("ring", world))
    except ValueError as e:
        out.append(("error", str(e)))
    return out


@pytest.mark.parametrize("world", [2, 3, 4])
def test_alltoall_is_all_to_all_single(world):
    res = run_local(_child, world, timeout=240)
    for rank_rows in res:
        rows = [r for r in rank_rows if r[1] not in ("trace",) and r[0] != "error"]
        assert len(rows) == len(CASES) * 5
        # out of place, in place, and the input left as it was
        assert all(r[4] and r[5] and r[6] for r in rows), [r for r in rows if not (r[4] and r[5] and r[6])]
        traces = [r for r in rank_rows if r[1] == "trace"]
        # last call: 4096 bfloat16 elements per block, 2 bytes: nccl-tests' size is one rank's input
        for name, _, size, moved, _flows in traces:
            assert size == world * 4096 * 2
            blocks = world * (world - 1)                  # pairwise: each off-diagonal block once
            if name == "alltoall-pairwise":
                assert moved == blocks * 4096 * 2
            else:                                          # bruck: a block moves once per set bit
                bits = sum(bin(d).count("1") for d in range(1, world)) * world
                assert moved == bits * 4096 * 2
        errors = [r[1] for r in rank_rows if r[0] == "error"]
        assert errors == [f"RAllToAll: {world + 1} elements do not split into {world} equal blocks (one per rank)",
                          "RAllToAll: pattern computes allreduce, not alltoall"]


def test_matrix_layout_is_row_major_blocks():
    from reactccl.runtime.layout import chunk_bounds
    p = generate("alltoall-bruck", 3, channels=2)
    b = chunk_bounds(p, 3 * 12)                       # m = 12 elements per rank, 4 per block, 2 per chunk
    assert b.tolist() == list(range(0, 37, 2))
    assert np.array_equal(p.chunk_block, np.repeat(np.arange(9), 2))

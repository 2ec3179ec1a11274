"""verify and the runtime agree on what a pattern computes (issue 11, critical item).

Every rank's tensor starts as random junk except where the collective gives it
an input; RCollective works in place, so a ``reduce`` into a position the rank
does not hold yet adds into junk. Each case runs on real Gloo ranks with
``verify_patterns=False`` and is compared with the exact answer computed from
every rank's (seeded) input: a pattern verify accepts must be exact on every
rank, and the op-flipped patterns verify rejects really are wrong there.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from reactccl.algorithms import generate  # noqa: E402
from reactccl.pattern import PatternError, verify  # noqa: E402
from reactccl.runtime import RCollective, block_bounds  # noqa: E402
from reactccl.runtime.local import run_local  # noqa: E402

pytestmark = pytest.mark.torch
NUMEL = 12


def _input(rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(7000 + rank)
    return torch.randint(1, 1000, (NUMEL,), generator=g, dtype=torch.int64)


def _want(p, rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(exact result, mask of the positions the collective defines on ``rank``)."""
    xs = [_input(r) for r in range(world)]
    b = block_bounds(world, NUMEL)
    mask = torch.ones(NUMEL, dtype=torch.bool)
    coll = p.collective.value
    if coll == "broadcast":
        return xs[p.root].clone(), mask
    if coll == "allgather":
        return torch.cat([xs[r][b[r]:b[r + 1]] for r in range(world)]), mask
    want = torch.stack(xs).sum(0)
    if coll == "reducescatter":
        mask[:] = False
        mask[b[rank]:b[rank + 1]] = True
    elif coll == "reduce":
        mask[:] = rank == p.root
    return want, mask


def _flip_all(p):
    """Every flow made a reduce (the issue's AllGather/Broadcast case)."""
    return p.replace(op=np.zeros(p.num_flows, dtype=np.int8), name=p.name + "/all-reduce-ops")


def _flip_first_copy(p):
    """Only the first copy flow made a reduce (None if the pattern has no copy)."""
    i = np.flatnonzero(p.op == 1)
    if not i.size:
        return None
    op = p.op.copy()
    op[i[0]] = 0
    return p.replace(op=op, name=p.name + f"/flow{i[0]}-reduce")


def _dup_last(p):
    """The last flow sent once more, one step later (a second reduce double-counts)."""
    f = p.num_flows - 1
    a, b = p.chunk_ptr[f], p.chunk_ptr[f + 1]
    return p.replace(step=np.append(p.step, p.step[f] + 1), src=np.append(p.src, p.src[f]),
                     dst=np.append(p.dst, p.dst[f]), op=np.append(p.op, p.op[f]),
                     chunk_ptr=np.append(p.chunk_ptr, p.chunk_ptr[-1] + b - a),
                     chunk_idx=np.append(p.chunk_idx, p.chunk_idx[a:b]), name=p.name + "/dup-last")


def _cases(world: int) -> list:
    names = ["ring", "nccl-tree", "rabenseifner", "ring-allgather", "recursive-doubling", "ring-reducescatter"]
    if world & (world - 1) == 0:
        names.append("rd-allreduce")
    pats = [generate(n, world) for n in names]
    pats += [generate("binomial-broadcast", world, root=world - 1), generate("binomial-reduce", world, root=1)]
    out = []
    for p in pats:
        out.append(p)
        out.append(_flip_all(p))
        out.append(_dup_last(p))
        q = _flip_first_copy(p)
        if q is not None:
            out.append(q)
    return out


def _child(rank: int, world: int) -> list:
    res = []
    for p in _cases(world):
        got = RCollective(p, timeout=20, verify_patterns=False)(_input(rank))
        want, mask = _want(p, rank, world)
        res.append((p.name, p.collective.value, bool(torch.equal(got[mask], want[mask]))))
    return res


@pytest.mark.parametrize("world", [3, 4])
def test_verify_accepts_exactly_what_the_runtime_computes(world):
    results = run_local(_child, world, timeout=240)
    cases = _cases(world)
    seen = set()
    for i, p in enumerate(cases):
        exact = all(r[i][2] for r in results)
        try:
            verify(p)
            accepted = True
        except PatternError:
            accepted = False
        assert accepted == exact, (f"{p.name} ({p.collective.value}, {world} ranks): verify "
                                   f"{'accepts' if accepted else 'rejects'} it, the runtime is "
                                   f"{'exact' if exact else 'wrong on some rank'}")
        if "/" not in p.name:
            assert accepted, f"generator output {p.name} must verify"
        seen.add((p.collective.value, accepted))
    # every collective has both an exact generator pattern and a rejected, wrongly computed mutant
    for coll in ("allreduce", "allgather", "reducescatter", "broadcast", "reduce"):
        assert (coll, True) in seen and (coll, False) in seen, coll

"""AllToAll through the stack: its N x N block layout, the generators' flows (hand-listed), verify's
verdicts, the alpha-beta and simulated times (hand-computed), busbw, JSON, the MSCCL refusal and the
tuner's moves (① relabels blocks with the ranks; ② and ③ have nothing to swap)."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.alltoall import bruck_blocks, nccl_p2p_deltas
from reactccl.cost.alphabeta import alpha_beta_schedule, hockney_time
from reactccl.pattern import (
    Collective,
    CollectivePattern,
    MscclError,
    PatternError,
    VerificationError,
    chunk_dest,
    chunk_owner,
    dumps,
    loads,
    to_msccl_xml,
    verify,
)
from reactccl.trace import busbw_factor

S, ALPHA, BETA = 4e6, 1e-6, 8 / 100e9      # bytes, s, s/byte (100 Gbps)


def _flows(p):
    return sorted((f.step, f.src, f.dst, f.chunks, f.op.value) for f in p.flows)


def test_layout_blocks_rows_and_columns():
    p = generate("alltoall-pairwise", 3, channels=2)
    assert p.collective is Collective.ALLTOALL and p.num_chunks == 18
    assert p.chunk_block.tolist() == [b for b in range(9) for _ in range(2)]
    assert chunk_owner(p).tolist() == [b // 3 for b in range(9) for _ in range(2)]      # row s: rank s's input
    assert chunk_dest(p).tolist() == [b % 3 for b in range(9) for _ in range(2)]        # column d: rank d's output
    assert p.chunk_graph.tolist() == [0, 1] * 9
    assert Collective.ALLTOALL.num_blocks(3) == 9 and Collective.ALLTOALL.message_scale(3) == 3
    # a chunk of 1/18 of the 3 x 3 matrix carries S/6 for nccl-tests' size S (one rank's buffer)
    assert np.allclose(p.flow_bytes(S), S / 6)
    # a chunk across two blocks is refused, naming the (source, destination) block
    with pytest.raises(PatternError, match=r"chunks\[0\]: for alltoall every chunk must lie inside one \(source, "
                                           r"destination\) block \(block = 1/4 of the message\)"):
        CollectivePattern.from_arrays("alltoall", 2, [0.5, 0.5], [0, 0], [], [], [], [], [0], [])


def test_pairwise_orders_are_the_listed_flows():
    shift = generate("alltoall-pairwise", 4, order="shift")
    # step k-1: rank r sends its block for r+k, chunk r*4 + (r+k) % 4
    assert _flows(shift) == sorted((k - 1, r, (r + k) % 4, (r * 4 + (r + k) % 4,), "copy")
                                   for k in (1, 2, 3) for r in range(4))
    together = generate("alltoall-pairwise", 4)
    assert together.num_steps == 1 and together.num_flows == 12
    assert nccl_p2p_deltas(16).tolist() == [0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8]
    assert nccl_p2p_deltas(5).tolist() == [0, 1, 3, 2, 4]        # 6, 7 and 5 skipped (>= 5)
    nccl = generate("alltoall-pairwise", 5, order="nccl")
    assert [sorted(set(((nccl.dst - nccl.src) % 5)[nccl.step == t].tolist())) for t in range(4)] == [[1], [3], [2], [4]]


def test_bruck_moves_each_block_by_the_bits_of_its_distance():
    p = generate("alltoall-bruck", 5)
    assert p.num_steps == 3 and p.num_flows == 15
    # step k: distances with bit k set; 5 ranks: k=0 {1, 3}, k=1 {2, 3}, k=2 {4}
    assert [int(np.diff(p.chunk_ptr)[p.step == k][0]) for k in range(3)] == [2, 2, 1]
    s, d = bruck_blocks(5, 1, 0)          # rank 0 at step 1 holds (0, 2) and (4, 2)... by distance 2 and 3
    assert list(zip(s.tolist(), d.tolist(), strict=True)) == [(0, 2), (4, 2)]
    f = p.flow(int(np.flatnonzero((p.step == 1) & (p.src == 0))[0]))
    assert (f.dst, sorted(f.chunks)) == (2, sorted([0 * 5 + 2, 4 * 5 + 2]))


@pytest.mark.parametrize("name,opts", [("alltoall-pairwise", {}), ("alltoall-pairwise", {"order": "shift"}),
                                       ("alltoall-pairwise", {"order": "nccl", "channels": 3}),
                                       ("alltoall-bruck", {}), ("alltoall-bruck", {"channels": 2})])
@pytest.mark.parametrize("n", [1, 2, 3, 6, 8, 13, 70])
def test_every_generator_verifies_both_ways(name, opts, n):
    p = generate(name, n, **opts)
    verify(p, compiled=True)                # the compiled accept path (n <= 64; else the reference)
    verify(p, compiled=False)
    assert (p.num_flows == 0) == (n == 1)


def test_verify_names_a_block_delivered_to_the_wrong_rank():
    p = generate("alltoall-pairwise", 3)
    f = int(np.flatnonzero((p.src == 0) & (p.dst == 1))[0])
    dst = p.dst.copy()
    dst[f] = 2                          # rank 0's block for 1 goes to 2 instead
    q = p.replace(dst=dst)
    for compiled in (True, False):
        with pytest.raises(VerificationError, match=r"alltoall not computed: rank 1, chunk 1: data of rank 0 missing "
                                                    r"\(never received anything\)"):
            verify(q, compiled=compiled)
    # a reduce of a block into a rank that holds nothing there yet
    with pytest.raises(VerificationError, match="reduces chunk 1 into rank 1, whose value there is undefined"):
        verify(p.replace(op=np.zeros(p.num_flows, np.int8)))


def test_alpha_beta_and_busbw():
    # together: one step, every rank sends and receives 3 blocks of S/4: alpha + beta 3S/4
    assert hockney_time(generate("alltoall-pairwise", 4), S, ALPHA, BETA) == pytest.approx(ALPHA + BETA * 0.75 * S)
    # bruck on 4: two steps of two blocks (S/2) each
    assert hockney_time(generate("alltoall-bruck", 4), S, ALPHA, BETA) == pytest.approx(2 * (ALPHA + BETA * S / 2))
    # shift, step order: three sends of S/4 one after another from every rank
    sch = alpha_beta_schedule(generate("alltoall-pairwise", 4, order="shift"), S, ALPHA, BETA)
    assert sch.completion == pytest.approx(3 * BETA * S / 4 + ALPHA)
    assert busbw_factor("alltoall", 4) == 0.75 and busbw_factor("alltoall", 1) == 0.0


def test_simulated_times_on_a_star():
    from reactccl.netsim import run_simulation
    hop = 2e-6                        # host -> switch -> host, 1 us each
    for name, opts, want in (("alltoall-pairwise", {}, hop + 3 * S / 4 * 8 / 100e9),       # 3 flows share the NIC
                             ("alltoall-bruck", {}, 2 * (hop + S / 2 * 8 / 100e9))):       # 2 steps of S/2
        r = run_simulation(generate(name, 4, **opts), topology="star:hosts=4", size=S, epochs=1, slowest=0)
        assert r.durations[0] == pytest.approx(want, rel=1e-9)
        assert r.busbw[0] == pytest.approx(S / want * 0.75, rel=1e-9)


def test_json_round_trip_and_msccl_refusal():
    p = generate("alltoall-bruck", 6, channels=2)
    assert loads(dumps(p)) == p
    with pytest.raises(MscclError, match="alltoall: no MSCCL XML export yet"):
        to_msccl_xml(p)


def test_tuner_global_swap_moves_blocks_with_ranks():
    from reactccl.tuner.equivalence import brute_force_viable_swaps, find_viable_swaps
    from reactccl.tuner.transforms import Placement, Swap, Transform
    together = generate("alltoall-pairwise", 4)
    q = Placement(together).apply(Swap(Transform.GLOBAL, 0, 2)).pattern     # verified
    assert q == together           # all pairs at once: a relabel gives the same flows
    shift = generate("alltoall-pairwise", 4, order="shift")
    q = Placement(shift).apply(Swap(Transform.GLOBAL, 0, 1)).pattern
    assert q != shift
    # step 0 now pairs 1->0 (was 0->1) carrying block (1, 0), chunk 4
    f = q.flow(int(np.flatnonzero((q.step == 0) & (q.src == 1))[0]))
    assert (f.dst, f.chunks) == (0, (1 * 4 + 0,))
    for p in (shift, generate("alltoall-bruck", 4)):
        viable = find_viable_swaps(p)
        assert len(viable) == 0 and len(brute_force_viable_swaps(p)) == 0   # a partial relabel misdelivers


def test_react_on_alltoall_only_relabels_whole_ranks():
    """REACT §5.3's moves on an AllToAll: ② and ③ have no viable swap (above), so every decision is a
    ① swap (or a revert), and every pattern it runs is a verified AllToAll. Rank 3's host receives two
    background flows: REACT tries ① swaps that move rank 3's receives to other steps."""
    from reactccl.netsim import run_simulation
    from reactccl.tuner import ReactController, ReactParams
    r = run_simulation(generate("alltoall-pairwise", 8, order="shift"), topology="fat-tree:k=4", size=20e6,
                       epochs=24, background=["into:3:p=2"], seed=1, slowest=0, keep_traces=True,
                       controller=lambda p: ReactController(p, ReactParams(seed=1)))
    decisions = r.controller.decisions
    assert len(decisions) >= 1
    swaps = [sw for d in decisions for sw in d.swaps]
    assert swaps and all(sw["transform"] == 1 for sw in swaps), swaps
    for tr in r.traces:
        verify(tr.pattern)

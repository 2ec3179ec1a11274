"""Hand-built patterns the runtime tests share: each makes one ordering hazard of the executors
happen (imported by the test modules; not a test module itself)."""

from reactccl.pattern import PatternBuilder, verify


def copy_after_reduce():
    """3 ranks, one chunk: rank 0 gets a reduce at step 0 and a copy at step 2, and sends at step 0."""
    b = PatternBuilder("allreduce", 3, name="copy-after-reduce")
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 1, [c])
    b.flow(0, 2, 0, [c])
    b.flow(1, 2, 1, [c])
    b.flow(2, 1, 0, [c], "copy")
    b.flow(2, 1, 2, [c], "copy")
    p = b.build()
    verify(p)
    return p


def write_after_send():
    """Rank 0 sends its chunk unstaged at step 0 and adds rank 1's value into it at step 1, from a
    flow that does not depend on the send: the add must wait until the send has left."""
    b = PatternBuilder("allreduce", 3, name="write-after-send")
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 2, [c])
    b.flow(0, 1, 2, [c])
    b.flow(1, 1, 0, [c])
    b.flow(2, 2, 0, [c], "copy")
    b.flow(2, 2, 1, [c], "copy")
    p = b.build()
    verify(p)
    return p


def rd_one_chunk(n):
    """Recursive doubling AllReduce on one chunk: at step k rank r exchanges with r ^ 2^k,
    so every rank sends the chunk while it receives into it."""
    b = PatternBuilder("allreduce", n, name="rd-1chunk")
    c = b.chunk(1.0, 0)
    for k in range(n.bit_length() - 1):
        for r in range(n):
            b.flow(k, r, r ^ (1 << k), [c])
    p = b.build()
    verify(p)
    return p


def copy_after_two_sends():
    """Rank 0 sends its chunk to ranks 2 and 1 in step 0, then gets a copy from rank 1 that
    depends on the second send only: the copy may not land in place while the first send to
    rank 2 may still be reading the chunk. (Found by a review fuzzing the direct executor.)"""
    b = PatternBuilder("allreduce", 3, name="copy-after-two-sends")
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 2, [c])
    b.flow(0, 0, 1, [c])
    b.flow(0, 1, 2, [c])
    b.flow(0, 2, 1, [c])
    b.flow(1, 1, 0, [c], "copy")
    p = b.build()
    verify(p)
    return p

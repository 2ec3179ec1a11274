"""The compiled engine's indexed event heap (reactccl.netsim.heap) and the hash core.py pins."""

import hashlib
from pathlib import Path

import numpy as np

from reactccl.netsim import core, heap


def test_core_pins_the_modules_it_compiles_in():
    # numba keys core's disk cache on core.py alone: an edit of heap.py or prepare.py must come
    # with a new pin in core.PINNED
    here = Path(core.__file__).parent
    for name, pin in core.PINNED.items():
        assert hashlib.sha256((here / name).read_bytes()).hexdigest()[:16] == pin, name
    assert core._CACHE


def test_heap_pops_in_time_kind_id_order_and_tracks_moved_entries():
    rng = np.random.default_rng(7)
    cap = 4
    ht, hk, hi, hv = np.zeros(cap), np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap, np.int64)
    pos = np.full((50, 1), -1, np.int64)
    n, live = 0, {}                              # tracked id -> (time, version); others in `other`
    other = []
    for step in range(400):
        op = rng.integers(3)
        if op == 0 or n == 0:                    # push: a tracked entry or another kind
            t = float(rng.integers(20))          # ties on time are common
            if rng.random() < 0.6 and len(live) < 50:
                i = next(j for j in range(50) if j not in live)
                if n >= len(ht):
                    ht, hk, hi, hv = heap.heap_grow(ht, hk, hi, hv, n + 1)
                heap.heap_push(ht, hk, hi, hv, pos, 0, n, t, heap.TRACKED, i, step)
                live[i] = (t, step)
            else:
                k, i = int(rng.integers(1, 3)), int(rng.integers(5))
                if n >= len(ht):
                    ht, hk, hi, hv = heap.heap_grow(ht, hk, hi, hv, n + 1)
                heap.heap_push(ht, hk, hi, hv, pos, 0, n, t, k, i, 0)
                other.append((t, k, i))
            n += 1
        elif op == 1 and live:                   # move a tracked entry to a new time
            i = list(live)[int(rng.integers(len(live)))]
            t = float(rng.integers(20))
            heap.heap_move(ht, hk, hi, hv, pos, 0, int(pos[i, 0]), n, t, step)
            live[i] = (t, step)
        else:                                    # pop: the least (time, kind, id)
            want = min([(t, heap.TRACKED, i) for i, (t, _) in live.items()] + other)
            got = (ht[0], hk[0], hi[0])
            assert got == want
            if hk[0] == heap.TRACKED:
                assert hv[0] == live.pop(int(hi[0]))[1]
            else:
                other.remove(want)
            heap.heap_pop(ht, hk, hi, hv, pos, 0, n)
            n -= 1
        for i in live:                           # every tracked entry knows its index
            assert hi[pos[i, 0]] == i and hk[pos[i, 0]] == heap.TRACKED
        assert n == len(live) + len(other)

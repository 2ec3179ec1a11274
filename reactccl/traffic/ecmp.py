"""The ECMP port of every flow of an epoch, drawn exactly as
``numpy.random.default_rng([seed, epoch, job]).integers(ports, size=n)`` draws it, compiled.

The simulator draws one port per flow and epoch from a generator keyed by ``(seed, epoch, job)``
(:class:`~reactccl.netsim.network.SimulatedNetwork`, and the packet engine the same way). Making
that generator costs about 15-20 µs in numpy (hashing the key through ``SeedSequence``, seeding
``PCG64``, ``Generator.integers``), which is as much as a whole compiled epoch of a small job.
:func:`ecmp_ports` computes the same integers in one compiled call:

* ``SeedSequence`` (numpy ``bit_generator.pyx``): the key's 32-bit words are hashed into a
  4-word pool (``hashmix``/``mix``), and ``generate_state(4, uint64)`` hashes the pool again;
* ``PCG64`` seeding (``pcg64_set_seed``): state = words 0-1 (high, low), increment words 2-3,
  then ``srandom``: state 0, inc = 2 inc + 1, step, add the seed, step; each output is
  XSL-RR of the stepped 128-bit LCG state (O'Neill, PCG family);
* ``integers(p)`` with ``p - 1 < 2^32 - 1``: 32-bit Lemire bounded draws (numpy
  ``distributions.c``), each 64-bit output giving its low then its high half.

Keys outside what this covers (a negative part or a part >= 2^32, ``p`` not in 2 .. 2^32 - 2)
go to numpy itself, so the result is the same in every case; ``tests/test_netsim_ecmp.py``
checks both against numpy over many keys, port counts (rejection-heavy ones too) and sizes.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np
from numba import njit

M32 = np.uint64(0xFFFFFFFF)
_WORD = 1 << 32          # a key part below this is one SeedSequence word
_P_MAX = (1 << 32) - 1   # ports below this: 32-bit Lemire draws in numpy
INIT_A, MULT_A, INIT_B, MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
MIX_L, MIX_R = 0xCA01F9DD, 0x4973F715
# PCG's default 128-bit multiplier, (high, low) 64-bit words
PCG_MULT_HI, PCG_MULT_LO = 2549297995355413924, 4865540595714422341


@njit(cache=True, inline="always")
def _hashmix(value, h):
    """``SeedSequence.hashmix``: returns (hashed value, next hash constant), 32-bit words in uint64."""
    value = (value ^ h) & M32
    h = (h * np.uint64(MULT_A)) & M32
    value = (value * h) & M32
    return value ^ (value >> np.uint64(16)), h


@njit(cache=True, inline="always")
def _mix(x, y):
    r = (np.uint64(MIX_L) * x - np.uint64(MIX_R) * y) & M32
    return r ^ (r >> np.uint64(16))


@njit(cache=True, inline="always")
def _mul64(a, b):
    """The 128-bit product of two uint64 as (high, low)."""
    a0, a1 = a & M32, a >> np.uint64(32)
    b0, b1 = b & M32, b >> np.uint64(32)
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> np.uint64(32)) + (p01 & M32) + (p10 & M32)
    hi = p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    return hi, (mid << np.uint64(32)) | (p00 & M32)


@njit(cache=True, inline="always")
def _step(sh, sl, ih, il):
    """One LCG step mod 2^128: state x multiplier + increment."""
    hi, lo = _mul64(sl, np.uint64(PCG_MULT_LO))
    hi = hi + sl * np.uint64(PCG_MULT_HI) + sh * np.uint64(PCG_MULT_LO)
    lo2 = lo + il
    carry = np.uint64(1) if lo2 < lo else np.uint64(0)
    return hi + ih + carry, lo2


@njit(cache=True)
def _draw(words, ports, n):
    """``default_rng(key).integers(ports, size=n)`` for a key given as its 32-bit ``words``."""
    pool = np.zeros(4, np.uint64)
    h = np.uint64(INIT_A)
    for i in range(4):
        v = words[i] if i < len(words) else np.uint64(0)
        pool[i], h = _hashmix(v, h)
    for s in range(4):
        for d in range(4):
            if s != d:
                v, h = _hashmix(pool[s], h)
                pool[d] = _mix(pool[d], v)
    for s in range(4, len(words)):
        for d in range(4):
            v, h = _hashmix(words[s], h)
            pool[d] = _mix(pool[d], v)
    state = np.zeros(8, np.uint64)        # generate_state(4, uint64) as 32-bit words
    hb = np.uint64(INIT_B)
    for i in range(8):
        v = pool[i % 4] ^ hb
        hb = (hb * np.uint64(MULT_B)) & M32
        v = (v * hb) & M32
        state[i] = v ^ (v >> np.uint64(16))
    seed_hi = state[0] | (state[1] << np.uint64(32))
    seed_lo = state[2] | (state[3] << np.uint64(32))
    inc_hi = state[4] | (state[5] << np.uint64(32))
    inc_lo = state[6] | (state[7] << np.uint64(32))
    ih = (inc_hi << np.uint64(1)) | (inc_lo >> np.uint64(63))
    il = (inc_lo << np.uint64(1)) | np.uint64(1)
    sh, sl = _step(np.uint64(0), np.uint64(0), ih, il)
    lo = sl + seed_lo
    sh = sh + seed_hi + (np.uint64(1) if lo < sl else np.uint64(0))
    sh, sl = _step(sh, lo, ih, il)
    out = np.empty(n, np.int64)
    p = np.uint64(ports)
    threshold = (M32 - (p - np.uint64(1))) % p
    have, buf = False, np.uint64(0)
    for k in range(n):
        while True:
            if have:
                u, have = buf, False
            else:
                sh, sl = _step(sh, sl, ih, il)
                rot = sh >> np.uint64(58)
                x = sh ^ sl
                r = (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))
                u, buf, have = r & M32, r >> np.uint64(32), True
            m = u * p
            if (m & M32) >= threshold:
                break
        out[k] = np.int64(m >> np.uint64(32))
    return out


def ecmp_ports(key: Sequence[int], ports: int, n: int) -> np.ndarray:
    """The ECMP port of each of ``n`` flows: ``numpy.random.default_rng(list(key)).integers(ports, size=n)``,
    the same int64 array of shape ``(n,)``, compiled where the key's parts are in 0 .. 2^32 - 1 and
    ``ports`` in 2 .. 2^32 - 2 (numpy's own call otherwise). ``key`` is e.g. ``(seed, epoch, job)``.

    Raises:
        ValueError: as numpy (``ports`` < 1, ``n`` < 0, a negative key part).
        TypeError: a key part that is not an integer (numpy refuses it too).
    """
    ports, n = int(ports), int(n)
    key = [operator.index(v) for v in key]      # SeedSequence takes integers only, as here
    if 2 <= ports < _P_MAX and n > 0 and key and all(0 <= v < _WORD for v in key):
        return _draw(np.array(key, np.uint64), ports, n)   # one 32-bit word per part: as SeedSequence reads it
    return np.random.default_rng(key).integers(ports, size=n)

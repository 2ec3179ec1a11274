"""The compiled ECMP port draw is numpy's ``default_rng(key).integers(ports, size=n)``, bit for bit."""

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.netsim import SimulatedCluster
from reactccl.traffic.ecmp import ecmp_ports
from reactccl.topology import fat_tree

# 1431655766 = ceil(2^32 / 3): Lemire's method rejects about a third of the 32-bit draws, so the
# rejection loop and the low/high halves it consumes are exercised; 2^32 - 1 and up go to numpy
PORTS = (1, 2, 3, 4, 5, 8, 16, 1000, 2 ** 31 + 5, 1431655766, 2 ** 32 - 2, 2 ** 32 - 1, 2 ** 32, 2 ** 40)


@pytest.mark.parametrize("ports", PORTS)
def test_same_integers_as_numpy(ports):
    for key in ((0, 0, 0), (1, 7, 0), (3, 1000, 2), (2 ** 32 - 1, 5, 1), (123456789, 0, 3)):
        for n in (0, 1, 2, 7, 28, 101):
            want = np.random.default_rng(list(key)).integers(ports, size=n)
            got = ecmp_ports(key, ports, n)
            assert got.dtype == want.dtype and np.array_equal(got, want), (key, ports, n)


def test_keys_of_other_lengths_and_large_parts():
    for key in ((1,), (1, 2), (1, 2, 3, 4, 5, 6), (2 ** 33, 1), (0,), (2 ** 70, 3, 1)):
        assert np.array_equal(ecmp_ports(key, 4, 9), np.random.default_rng(list(key)).integers(4, size=9)), key
    with pytest.raises(ValueError):
        ecmp_ports((-1, 0, 0), 4, 3)       # numpy's own refusal of a negative key part


def test_simulator_meta_keeps_the_numpy_draw():
    c = SimulatedCluster(fat_tree(4), np.arange(8), 1e6, seed=5, engine="compiled")
    p = generate("ring", 8)
    for epoch in range(3):
        t = c.run_epoch(p)
        assert np.array_equal(t.meta["ports"], np.random.default_rng([5, epoch, 0]).integers(4, size=p.num_flows))

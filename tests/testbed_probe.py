"""One rank of test_testbed_servers.py: learn the servers, then time a Gloo transfer to a rank on
the same host and one to a rank on another host; print ``PROBE {json}``.

Run by ``Testbed.run(..., ranks_per_host=2)`` on 2 hosts (ranks 0, 1 on host 0; 2, 3 on host 1).
"""

from __future__ import annotations

import json
import os
import time

import torch
import torch.distributed as dist

from reactccl.runtime.grouping import learn_servers
from reactccl.runtime.listen import init_process_group

NBYTES = 4_000_000


def _timed(src: int, dst: int, buf: torch.Tensor) -> float:
    """Seconds for ``src`` to send ``buf`` to ``dst`` (both after a barrier; the receiver's clock)."""
    dist.barrier()
    t0 = time.monotonic()
    rank = dist.get_rank()
    if rank == src:
        dist.send(buf, dst)
    elif rank == dst:
        dist.recv(buf, src)
    t1 = time.monotonic()
    return t1 - t0


def main() -> None:
    torch.set_num_threads(1)
    init_process_group("gloo", timeout=60)
    g = learn_servers()
    buf = torch.zeros(NBYTES // 4, dtype=torch.float32)
    _timed(0, 1, buf)            # warm both connections up
    _timed(0, 2, buf)
    same = _timed(0, 1, buf)
    other = _timed(0, 2, buf)
    out = {"rank": dist.get_rank(), "servers": [list(s) for s in g.servers], "hierarchical": g.hierarchical,
           "warnings": list(g.warnings), "env": {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "GROUP_RANK")},
           "same_host_s": same, "other_host_s": other}
    print("PROBE " + json.dumps(out), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

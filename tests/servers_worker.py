"""One rank of test_runtime_servers.py's torchrun job: learn the servers, run the default
ring and tree AllReduce on them, compare with ``dist.all_reduce``; print one ``RESULT {json}``.

Run by ``torchrun --nnodes 2 --node-rank I --nproc-per-node 2`` twice on one machine, each
invocation with its own ``REACTCCL_TEST_HOST_ID`` (the test-only host override), so the two
torchrun "nodes" look like two hosts.
"""

from __future__ import annotations

import json
import os

import torch
import torch.distributed as dist

import reactccl.torch as rt
from reactccl.runtime.listen import init_process_group


def main() -> None:
    torch.set_num_threads(1)
    init_process_group("gloo", timeout=60)
    rank, world = dist.get_rank(), dist.get_world_size()
    out: dict = {"rank": rank, "env": {k: os.environ.get(k) for k in ("LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                                    "GROUP_RANK")}}
    g = torch.Generator().manual_seed(100 + rank)
    for algorithm in ("ring", "nccl-tree"):
        ar = rt.ReactAllReduce(algorithm=algorithm, react=False, timeout=30)
        res: dict = {"servers": [list(s) for s in ar.grouping.servers], "hierarchical": ar.grouping.hierarchical,
                     "pattern": ar.pattern.name}
        ints = torch.randint(-(1 << 40), 1 << 40, (3001,), generator=g, dtype=torch.int64)
        exact = torch.randint(-1000, 1000, (2000,), generator=g).to(torch.float32)   # sums exact in any order
        noisy = torch.randn(4097, generator=g)
        for name, x in (("int64", ints), ("float_exact", exact), ("float", noisy)):
            mine, ref = x.clone(), x.clone()
            ar(mine)
            dist.all_reduce(ref)
            res[name] = bool(torch.equal(mine, ref))
            if name == "float":    # bit-identical on every rank, close to Gloo's own sum
                every = [torch.empty_like(mine) for _ in range(world)]
                dist.all_gather(every, mine)
                res["float_identical"] = all(torch.equal(e, every[0]) for e in every)
                res["float_err"] = float((mine - ref).abs().max())
        out[algorithm] = res
        ar.close()
    print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

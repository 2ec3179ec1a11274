"""A DistributedDataParallel communication hook running REACT (one line to enable).

    model = DDP(net)
    state = reactccl.torch.enable_react(model)          # or: model.register_comm_hook(
                                                        #   ReactAllReduce(average=True), react_hook)

Every gradient bucket is all-reduced by :class:`ReactAllReduce` and averaged; the
buckets of one backward pass form one REACT epoch (the epoch ends at the bucket
DDP marks last). The hook runs the collective synchronously and returns a
completed future, so communication does not overlap the rest of backward
(DDP's own hook overlaps it); a training step costs more, but the gradients
are identical on every rank.

Source: PyTorch DDP communication hooks (``torch.distributed.algorithms.ddp_comm_hooks``).
No ``from __future__ import annotations`` here: DDP checks the hook's annotations at runtime.
"""

import torch
import torch.distributed as dist

from .allreduce import ReactAllReduce

__all__ = ["react_hook", "enable_react"]


def react_hook(state: ReactAllReduce, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: average ``bucket``'s gradients over the group with ``state``'s pattern."""
    buf = bucket.buffer()
    state.run(buf, end_epoch=bucket.is_last())
    if not state.average:
        buf.div_(state.world)
    fut: torch.futures.Future = torch.futures.Future()
    fut.set_result(buf)
    return fut


def enable_react(model: torch.nn.parallel.DistributedDataParallel, **kwargs) -> ReactAllReduce:
    """Register :func:`react_hook` on a DDP ``model`` with a new :class:`ReactAllReduce`
    over the model's process group (``kwargs`` go to it); returns the state."""
    kwargs.setdefault("group", getattr(model, "process_group", None))
    state = ReactAllReduce(**kwargs)
    model.register_comm_hook(state, react_hook)
    return state

"""A DistributedDataParallel communication hook running REACT (one line to enable).

    model = DDP(net)
    state = reactccl.torch.enable_react(model)          # or: model.register_comm_hook(
                                                        #   ReactAllReduce(average=True), react_hook)

Every gradient bucket is all-reduced by :class:`ReactAllReduce` and averaged; the
buckets of one backward pass form one REACT epoch (the epoch ends at the bucket
DDP marks last, and the pattern agreed for an epoch is switched to at its first
bucket, as with synchronous calls).

Asynchronous, like DDP's own hook: :func:`react_hook` hands the bucket to one
background thread per state and returns a ``torch.futures.Future`` at once; the
thread runs the buckets' collectives one after another, in the order DDP hands them
over (DDP launches buckets in index order on every rank, so every rank runs the same
sequence), and completes each future with the averaged bucket (or with the error).
So a bucket's communication overlaps the rest of backward, and DDP waits for the
futures where it waits for its own (end of backward). After one bucket fails, the
buckets still queued fail at once with that error instead of each waiting out a
timeout. Don't call the same state from the training thread while buckets are queued.

Source: PyTorch DDP communication hooks (``torch.distributed.algorithms.ddp_comm_hooks``:
a hook returns a Future of the reduced bucket; DDP waits for it in ``finalize_backward``).
No ``from __future__ import annotations`` here: DDP checks the hook's annotations at runtime.
"""

import queue
import threading
import weakref

import torch
import torch.distributed as dist

from .allreduce import ReactAllReduce

__all__ = ["react_hook", "enable_react", "BucketWorker"]

_STOP = object()


class BucketWorker:
    """One thread that runs ``state.run(bucket, end_epoch)`` jobs in order and completes their futures.

    ``submit(tensor, end_epoch)`` returns a ``torch.futures.Future`` completed with the
    averaged ``tensor`` (divided by the group size unless ``state.average`` does it). The
    thread is a daemon; :meth:`stop` ends it once the queued jobs are done (also called
    when the state is garbage-collected).
    """

    def __init__(self, state: ReactAllReduce) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._failed = None
        ref = weakref.ref(state)
        self._thread = threading.Thread(target=self._loop, args=(ref, self._jobs), name="react-ddp-buckets",
                                        daemon=True)
        self._thread.start()
        weakref.finalize(state, self._jobs.put, _STOP)

    def submit(self, tensor: torch.Tensor, end_epoch: bool) -> torch.futures.Future:
        fut: torch.futures.Future = torch.futures.Future()
        # CUDA: the thread runs on the caller's device and stream (a new thread would start on
        # device 0's default stream, and the gradients were written on the caller's)
        stream = torch.cuda.current_stream(tensor.device) if tensor.is_cuda else None
        self._jobs.put((tensor, end_epoch, fut, stream))
        return fut

    def stop(self, timeout: float = 5.0) -> None:
        self._jobs.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def _loop(self, ref, jobs) -> None:
        while True:
            job = jobs.get()
            if job is _STOP:
                return
            tensor, end_epoch, fut, stream = job
            state = ref()
            if state is None:
                fut.set_exception(RuntimeError("react_hook: the ReactAllReduce state was garbage-collected"))
                continue
            if self._failed is not None:
                fut.set_exception(RuntimeError(f"react_hook: an earlier bucket failed: {self._failed!r}"))
                continue
            try:
                if stream is not None:
                    with torch.cuda.device(tensor.device), torch.cuda.stream(stream):
                        state.run(tensor, end_epoch=end_epoch)
                        if not state.average:
                            tensor.div_(state.world)
                        stream.synchronize()
                else:
                    state.run(tensor, end_epoch=end_epoch)
                    if not state.average:
                        tensor.div_(state.world)
            except BaseException as e:  # noqa: BLE001 - handed to DDP through the future
                self._failed = e
                fut.set_exception(e)
            else:
                fut.set_result(tensor)
            del state


def _worker(state: ReactAllReduce) -> BucketWorker:
    w = getattr(state, "_bucket_worker", None)
    if w is None:
        w = state._bucket_worker = BucketWorker(state)
    return w


def react_hook(state: ReactAllReduce, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: average ``bucket``'s gradients over the group with ``state``'s pattern,
    asynchronously (see the module docstring)."""
    return _worker(state).submit(bucket.buffer(), bucket.is_last())


def enable_react(model: torch.nn.parallel.DistributedDataParallel, **kwargs) -> ReactAllReduce:
    """Register :func:`react_hook` on a DDP ``model`` with a new :class:`ReactAllReduce`
    over the model's process group (``kwargs`` go to it); returns the state."""
    kwargs.setdefault("group", getattr(model, "process_group", None))
    state = ReactAllReduce(**kwargs)
    model.register_comm_hook(state, react_hook)
    return state

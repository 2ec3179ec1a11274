"""Run a function on N local processes joined in a process group (tests, examples, bench).

``run_local(fn, 4, arg)`` starts 4 spawned processes, each calls
``dist.init_process_group("gloo")`` on a free localhost port, runs
``fn(rank, world_size, arg)`` and sends back its return value (picklable) or
its exception text. The parent waits with a deadline and kills every process
left when it passes, so a broken collective never hangs the caller.

Everything listens on 127.0.0.1 only: the parent hosts the rendezvous store bound
to it (:func:`reactccl.runtime.listen.bound_store`), and the ranks' Gloo pairs use the
loopback interface unless ``GLOO_SOCKET_IFNAME`` says otherwise.
"""

from __future__ import annotations

import datetime
import os
import queue
import socket
import time
import traceback
from collections.abc import Callable
from typing import Any

from ..errors import ReactcclError
from .listen import bound_store, interface_of

__all__ = ["run_local", "free_port", "LocalRunError"]


class LocalRunError(ReactcclError, RuntimeError):
    """A rank raised, died, or the run passed its deadline.

    Attributes: ``errors`` = {rank: traceback text or reason}; ``results`` = {rank: value}
    of the ranks that finished.
    """

    def __init__(self, message: str, errors: dict[int, str], results: dict[int, Any]) -> None:
        super().__init__(message)
        self.errors, self.results = errors, results


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(fn, rank, world, port, pg_timeout, backend, args, out) -> None:
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        os.environ.setdefault("GLOO_SOCKET_IFNAME", interface_of("127.0.0.1") or "lo")
        store = bound_store("127.0.0.1", port, world, is_master=False, timeout=pg_timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=pg_timeout))
        out.put((rank, True, fn(rank, world, *args)))
    except BaseException:  # noqa: BLE001 - the parent reports it with the rank
        out.put((rank, False, traceback.format_exc()))
    finally:
        try:
            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001
            pass
        out.close()
        out.join_thread()
        os._exit(0)


def run_local(fn: Callable[..., Any], world_size: int, *args, timeout: float = 60.0,
              pg_timeout: float = 20.0, allow_errors: bool = False, backend: str = "gloo") -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` processes on localhost.

    Args:
        fn: a module-level (picklable) function.
        timeout: seconds for the whole run; processes still alive then are killed.
        pg_timeout: the process group's timeout (seconds) for its collectives.
        allow_errors: return exception texts in place of results instead of raising.
        backend: ``"gloo"`` or ``"nccl"`` (then rank r uses GPU ``r % device_count``).

    Returns:
        The return values, indexed by rank (with ``allow_errors``, a rank that
        raised gives its traceback text as a ``str``; one that died, None).

    Raises:
        LocalRunError: a rank raised or died (unless ``allow_errors``), or the deadline passed.
    """
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    store = bound_store("127.0.0.1", 0, world_size + 1, is_master=True, timeout=max(timeout, pg_timeout))
    port = store.port
    procs = [ctx.Process(target=_child, args=(fn, r, world_size, port, pg_timeout, backend, args, out), daemon=True)
             for r in range(world_size)]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    errors: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) + len(errors) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                rank, ok, val = out.get(timeout=min(left, 0.5))
            except queue.Empty:
                for r, p in enumerate(procs):
                    if not p.is_alive() and r not in results and r not in errors and p.exitcode not in (0, None):
                        errors[r] = f"process died with exit code {p.exitcode}"
                continue
            (results if ok else errors)[rank] = val
    finally:
        for p in procs:
            p.join(timeout=max(0.0, min(2.0, deadline - time.monotonic())))
            if p.is_alive():
                p.kill()
                p.join(5)
    missing = [r for r in range(world_size) if r not in results and r not in errors]
    for r in missing:
        errors[r] = f"no result within {timeout:g} s (killed)"
    if errors and not allow_errors:
        first = min(errors)
        raise LocalRunError(f"run_local: {len(errors)} of {world_size} ranks failed; rank {first}:\n{errors[first]}",
                            errors, results)
    return [results.get(r, errors.get(r)) for r in range(world_size)]

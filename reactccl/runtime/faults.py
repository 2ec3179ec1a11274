"""Transport failures as the project's named error.

Gloo raises a plain ``RuntimeError`` ("Connection closed by peer ...") when a call
posts a send or receive on a pair whose peer died; that shows on the call *after*
the one that timed out. :func:`transport_error` words it as a
:class:`~reactccl.runtime.rcollective.FlowTimeoutError` (rank, epoch, the first line
of what the transport said), and :class:`BrokenGroup` remembers that the group
broke, so every later call fails the same way at once instead of reaching into a
dead group. Used by :class:`reactccl.torch.ReactAllReduce` and
:class:`reactccl.runtime.RealExecutor`.
"""

from __future__ import annotations

from .rcollective import FlowTimeoutError, MismatchError

__all__ = ["transport_error", "BrokenGroup"]


def transport_error(exc: BaseException, rank: int, where: str) -> FlowTimeoutError:
    """``exc`` (a transport's RuntimeError) as a FlowTimeoutError saying ``where`` it happened."""
    first = (str(exc).splitlines() or [type(exc).__name__])[0][:300]
    err = FlowTimeoutError(f"{where} on rank {rank}: the process group failed ({first}); a peer died or "
                           "closed its connection", rank, None)
    err.__cause__ = exc
    return err


class BrokenGroup:
    """Calls of a collective on one group: ``run(fn, epoch)`` calls ``fn()``; the first
    FlowTimeoutError (or transport RuntimeError, reworded) marks the group broken, and
    every later ``run`` raises FlowTimeoutError naming the epoch it broke in.
    MismatchError passes unchanged (the group is fine, the arguments were not)."""

    def __init__(self, where: str, rank: int) -> None:
        self.where, self.rank = where, rank
        self.broken: tuple[int, str] | None = None

    def run(self, fn, epoch: int):
        if self.broken is not None:
            raise FlowTimeoutError(f"{self.where} on rank {self.rank}: the process group broke in epoch "
                                   f"{self.broken[0]} ({self.broken[1]}); destroy it and restart the job "
                                   "(or re-create the group)", self.rank, None)
        try:
            return fn()
        except MismatchError:
            raise
        except FlowTimeoutError as e:
            self.broken = (epoch, (str(e).splitlines() or [""])[0][:300])
            raise
        except RuntimeError as e:
            err = transport_error(e, self.rank, f"{self.where}, epoch {epoch},")
            self.broken = (epoch, (str(e).splitlines() or [""])[0][:300])
            raise err from e

"""PyTorch front end of reactccl: :class:`ReactAllReduce` and a DDP communication hook.

    import reactccl.torch
    state = reactccl.torch.enable_react(ddp_model)      # REACT for a DDP job in one line

Importing this package imports PyTorch (absolute ``import torch`` inside it is
PyTorch itself, not this package).
"""

from .allreduce import DEFAULT_EVERY, ReactAllReduce, default_controller
from .ddp import enable_react, react_hook

__all__ = ["ReactAllReduce", "default_controller", "enable_react", "react_hook", "DEFAULT_EVERY"]

"""reactccl: collective communication patterns for AI clusters.

Generate a collective pattern, prove it correct, measure it, run it on a
simulated network or on real ranks through torch.distributed, and let REACT
tune it while the job runs. See DESIGN.md for the layers.
"""

__version__ = "0.1.0"

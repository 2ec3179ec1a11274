"""Cost models of patterns: the α-β (Hockney) model, per-round link loads, Ψ, Θ, Ω, goodput bound.

Knows nothing of executors.
"""

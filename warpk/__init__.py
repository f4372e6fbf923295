"""WARP-K: Watt-Aware Reinforcement Policy for Kernels.

Run it with `python -m warpk` (see README.md); the package layers are described in DESIGN.md.
"""

__version__ = "0.1.0"

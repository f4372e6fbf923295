"""Dense matrix multiplication C = A @ B in float32 (single op).

The reference is one torch.matmul call, as in KernelBench level 1: the room left is in the
kernel itself (tiling, register blocking, vectorised loads), not in fusing away passes.
B is scaled by 1/sqrt(K) so that C is O(1): with unscaled randn inputs C would be O(sqrt(K)) and
two correct fp32 summation orders would already differ by more than the 1e-4 tolerance.
"""
import math

import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
M = 4096
K = 4096
N = 4096

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"M": 256, "K": 512, "N": 256}}
SPLIT = "train"
KIND = "single_op"


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N) / math.sqrt(K)]


def get_init_inputs():
    return []

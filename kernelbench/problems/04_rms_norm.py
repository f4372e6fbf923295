"""RMS normalization over the last dimension with a learned scale (single op).

The reference computes x * rsqrt(mean(x^2) + eps) * weight with separate square,
mean, rsqrt and multiply ops, the form used in LLaMA-style model code.
The weight is random (not ones) so a candidate that ignores it is caught.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 16384
dim = 4096

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 2048, "dim": 1024}}
SPLIT = "heldout"
KIND = "single_op"


class Model(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        mean_sq = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(mean_sq + self.eps) * self.weight


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]

"""Residual add followed by layer normalization (fusion).

The reference adds a residual stream to the input and normalizes the sum over the
last dimension with explicit mean / variance reductions and an affine weight and bias,
as in a post-norm transformer block. The weight is random so it cannot be ignored.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 16384
dim = 4096

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 1024, "dim": 2048}}
SPLIT = "train"
KIND = "fusion"


class Model(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x, residual):
        h = x + residual
        mean = h.mean(dim=-1, keepdim=True)
        centered = h - mean
        var = (centered * centered).mean(dim=-1, keepdim=True)
        return centered / torch.sqrt(var + self.eps) * self.weight + self.bias


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]

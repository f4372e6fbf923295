"""Layer normalization over the last dimension with an affine weight and bias (single op).

The reference computes (x - mean) / sqrt(var + eps) * weight + bias from explicit
mean and biased-variance reductions, the textbook formula written with primitive ops.
The weight is random (not ones) so a candidate that ignores it is caught.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 8192
dim = 8192

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 1024, "dim": 2048}}
SPLIT = "train"
KIND = "single_op"


class Model(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(dim=-1, keepdim=True)
        return centered / torch.sqrt(var + self.eps) * self.weight + self.bias


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]

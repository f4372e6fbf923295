"""Adaptive layer norm (adaLN) modulation, as in diffusion transformers (fusion, norm).

out = layer_norm(x) * (1 + scale[:, None, :]) + shift[:, None, :], where the layer norm has no
affine parameters and shift / scale are per-sample conditioning vectors of shape (batch, dim).
The reference writes the normalization with explicit mean / variance reductions and then
modulates in further passes; a fused kernel reads x once and writes the output once.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 64
num_tokens = 1024
dim = 1152

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 8, "num_tokens": 256, "dim": 512}}
SPLIT = "heldout"
KIND = "fusion"


class Model(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, shift, scale):
        mean = x.mean(dim=-1, keepdim=True)
        centered = x - mean
        var = (centered * centered).mean(dim=-1, keepdim=True)
        normed = centered / torch.sqrt(var + self.eps)
        return normed * (1.0 + scale.unsqueeze(1)) + shift.unsqueeze(1)


def get_inputs():
    x = torch.randn(batch_size, num_tokens, dim) * 3.0 + 1.0
    shift = torch.randn(batch_size, dim)
    scale = torch.randn(batch_size, dim)
    return [x, shift, scale]


def get_init_inputs():
    return []

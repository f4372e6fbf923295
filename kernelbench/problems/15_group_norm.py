"""Group normalization of an NCHW activation with a per-channel affine (single op, norm).

The reference reshapes to (N, groups, -1), computes mean and biased variance explicitly,
normalizes, reshapes back and applies the per-channel weight and bias, each step a separate
pass. The weight and bias are random (not ones / zeros) so a candidate that ignores them fails.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 64
channels = 256
height = 64
width = 64
num_groups = 32

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 16, "channels": 128, "height": 32, "width": 32, "num_groups": 16}}
SPLIT = "heldout"
KIND = "single_op"


class Model(nn.Module):
    def __init__(self, num_groups, channels, eps=1e-5):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        n, c, h, w = x.shape
        grouped = x.reshape(n, self.num_groups, -1)
        mean = grouped.mean(dim=-1, keepdim=True)
        centered = grouped - mean
        var = (centered * centered).mean(dim=-1, keepdim=True)
        normed = (centered / torch.sqrt(var + self.eps)).reshape(n, c, h, w)
        return normed * self.weight[None, :, None, None] + self.bias[None, :, None, None]


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 2.0 + 0.5]


def get_init_inputs():
    return [num_groups, channels]

"""Sum over the middle dimension of a 3-D tensor: (B, R, C) -> (B, C) (single op, reduction).

Reducing over a non-innermost dimension is the case where the memory layout decides the kernel:
each output column gathers R values spaced C elements apart. The reference is one torch.sum call
(KernelBench level-1 style); the room left is in the kernel itself.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 128
reduce_dim = 4096
inner_dim = 1024

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 24, "reduce_dim": 512, "inner_dim": 512}}
SPLIT = "train"
KIND = "single_op"


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, reduce_dim, inner_dim)]


def get_init_inputs():
    return []

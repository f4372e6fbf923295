"""Mish activation, x * tanh(softplus(x)) (single op, activation).

The reference spells softplus as log1p(exp(x)) and evaluates each step as its own elementwise
op, four passes over memory where one suffices.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 4096
dim = 16384

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 512, "dim": 1024}}
SPLIT = "train"
KIND = "single_op"


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.tanh(torch.log1p(torch.exp(x)))


def get_inputs():
    return [torch.randn(batch_size, dim) * 3.0]


def get_init_inputs():
    return []

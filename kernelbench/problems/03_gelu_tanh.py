"""GELU activation, tanh approximation (single op).

The reference evaluates 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
term by term, as in many model codebases, which costs one memory pass per operator.
"""
import math

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
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3))
        return 0.5 * x * (1.0 + torch.tanh(inner))


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []

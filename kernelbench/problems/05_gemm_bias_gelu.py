"""Linear layer (GEMM + bias) followed by tanh-approximate GELU (fusion).

The reference runs nn.Linear and then evaluates the GELU tanh formula term by term,
so the activation epilogue makes several extra passes over the GEMM output.
"""
import math

import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 4096
in_features = 4096
out_features = 4096

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 256, "in_features": 128, "out_features": 1024}}
SPLIT = "train"
KIND = "fusion"


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.linear(x)
        inner = math.sqrt(2.0 / math.pi) * (y + 0.044715 * torch.pow(y, 3))
        return 0.5 * y * (1.0 + torch.tanh(inner))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]

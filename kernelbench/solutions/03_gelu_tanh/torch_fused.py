"""Fused GELU: the built-in tanh-approximate GELU kernel evaluates the formula in one pass."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x, approximate="tanh")

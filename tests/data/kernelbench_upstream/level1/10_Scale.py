import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies a tensor by a constant factor."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


size = 1024


def get_inputs():
    return [torch.randn(size, 8)]


def get_init_inputs():
    return [2.5]

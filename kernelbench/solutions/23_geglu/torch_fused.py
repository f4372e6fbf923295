"""GEGLU with the built-in exact GELU kernel on the first half and one multiply by the second
half: two passes instead of five."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return F.gelu(a).mul_(b)

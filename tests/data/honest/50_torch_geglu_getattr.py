"""GEGLU: the activation is looked up on torch.nn.functional by name with getattr (the usual
config idiom), F.gelu is the exact erf GELU."""
# task: 23_geglu
# backend: torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, activation: str = "gelu"):
        super().__init__()
        self.activation = getattr(F, activation)

    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return self.activation(a) * b

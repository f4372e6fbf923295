"""Mish through the built-in F.mish kernel: one pass instead of exp, log1p, tanh and multiply
passes."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.mish(x)

"""Residual add + layer norm: the add in place into a fresh buffer, then F.layer_norm; the steps
are small module-level helpers and a static method."""
# task: 06_residual_add_layer_norm
# backend: torch
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def residual(x, r):
    return torch.add(x, r)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))
        assert math.isfinite(eps)

    @staticmethod
    def _norm(h, weight, bias, eps):
        return F.layer_norm(h, weight.shape, weight, bias, eps)

    def forward(self, x, residual_in):
        return self._norm(residual(x, residual_in), self.weight, self.bias, self.eps)

"""One add for the residual, then a single fused F.layer_norm over the sum."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x, residual):
        h = torch.add(x, residual)
        return F.layer_norm(h, (h.shape[-1],), self.weight, self.bias, self.eps)

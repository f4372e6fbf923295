"""Missing normalisation: uses the sum of squares where the mean is needed (forgets / dim)."""
import torch
import torch.nn as nn

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        sq = x.pow(2).sum(dim=-1, keepdim=True)
        return x * torch.rsqrt(sq + self.eps) * self.weight

"""Row L2 normalisation as F.normalize (same clamp of the norm at eps)."""
# task: 12_l2_normalize
# backend: torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, eps=1e-12):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return F.normalize(x, p=2.0, dim=-1, eps=self.eps)

"""Python-level shape bug: views the sum with twice the hidden size per row, which raises."""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED_STATUS = "runtime_error"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x, residual):
        h = torch.cat([x, residual], dim=-1).view(-1, 2, x.shape[-1] + 1).sum(dim=1)
        return F.layer_norm(h, (h.shape[-1],), self.weight, self.bias, self.eps)

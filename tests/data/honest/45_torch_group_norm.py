"""Group norm as one F.group_norm call (statistics and affine in one kernel)."""
# task: 15_group_norm
# backend: torch
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, num_groups, channels, eps=1e-5):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

"""Defines the kernel under another name, so there is no ModelNew to evaluate."""
import torch
import torch.nn as nn


class FastSoftmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)

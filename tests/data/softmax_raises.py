"""Raises inside forward: a shape bug (softmax over a dimension that does not exist)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=5)

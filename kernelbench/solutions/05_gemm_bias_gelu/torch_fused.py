"""GEMM with the bias folded in (addmm), then one built-in tanh-GELU pass over the output."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return F.gelu(y, approximate="tanh")

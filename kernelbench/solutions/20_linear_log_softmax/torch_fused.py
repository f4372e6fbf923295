"""GEMM with the bias folded in (addmm), then one fused log-softmax pass over the logits."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        logits = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return torch.log_softmax(logits, dim=-1)

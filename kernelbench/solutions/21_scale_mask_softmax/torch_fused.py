"""Scale and mask in one pass (torch.add with alpha folds the multiply), then one fused softmax."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale=0.125):
        super().__init__()
        self.scale = scale

    def forward(self, scores, mask):
        return torch.softmax(torch.add(mask, scores, alpha=self.scale), dim=-1)

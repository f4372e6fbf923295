"""Causal depthwise conv1d as one grouped F.conv1d call with left padding, keeping the first
seq_len outputs, instead of one full-size multiply-add pass per tap over a padded copy."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel_size, groups=channels, bias=True)

    def forward(self, x):
        k = self.conv.kernel_size[0]
        padded = F.pad(x, (k - 1, 0))
        return F.conv1d(padded, self.conv.weight, self.conv.bias, groups=x.shape[1])

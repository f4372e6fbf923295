"""Wrong on purpose: forgets to normalise, so the output is exp(x - max), not a softmax."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.exp(x - x.amax(dim=-1, keepdim=True))

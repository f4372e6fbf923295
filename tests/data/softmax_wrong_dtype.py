"""Right values, wrong dtype: returns float64 where the reference returns float32."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x.double(), dim=-1)

"""Python-level shape bug: splits the last dimension into chunks of the full width (one chunk),
so unpacking into two halves raises."""
import torch.nn as nn
import torch.nn.functional as F

EXPECTED_STATUS = "runtime_error"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a, b = x.split(x.shape[-1], dim=-1)
        return F.gelu(a) * b

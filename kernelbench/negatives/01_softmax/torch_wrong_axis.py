"""Wrong axis: normalizes over dim 0 (the batch) instead of the last dimension."""
import torch
import torch.nn as nn

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=0)

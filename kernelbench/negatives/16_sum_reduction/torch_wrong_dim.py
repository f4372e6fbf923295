"""Wrong axis: reduces the innermost dimension instead of the middle one."""
import torch.nn as nn

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=2)

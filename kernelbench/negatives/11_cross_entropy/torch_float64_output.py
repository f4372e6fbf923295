"""Wrong dtype: computes the loss in float64 for accuracy and forgets to cast it back."""
import torch.nn as nn
import torch.nn.functional as F

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        return F.cross_entropy(logits.double(), targets, reduction="none")

"""Wrong formula: modulates with scale instead of (1 + scale), a common adaLN slip."""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, shift, scale):
        normed = F.layer_norm(x, (x.shape[-1],), eps=self.eps)
        return normed * scale.unsqueeze(1) + shift.unsqueeze(1)

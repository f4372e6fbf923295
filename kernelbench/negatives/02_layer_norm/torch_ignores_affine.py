"""Missing affine: calls F.layer_norm without the weight and bias it created."""
import torch
import torch.nn as nn
import torch.nn.functional as F

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), eps=self.eps)

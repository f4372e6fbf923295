"""Wrong dtype: returns the normalized output in float32 (forgets the final cast to bf16)."""
import torch
import torch.nn as nn

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x, residual):
        h = x + residual
        hf = h.float()
        normed = hf * torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight
        return normed, h

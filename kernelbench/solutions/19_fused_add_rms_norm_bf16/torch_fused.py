"""Residual add + RMS norm in bf16: one add for the new residual, then the float32 statistics
from a single vector-norm reduction and the scaling by the weight folded in before one downcast."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x, residual):
        h = torch.add(x, residual)
        hf = h.float()
        sq = torch.linalg.vector_norm(hf, ord=2, dim=-1, keepdim=True).pow_(2)
        inv_rms = sq.div_(hf.shape[-1]).add_(self.eps).rsqrt_()
        return hf.mul_(inv_rms).mul_(self.weight).to(x.dtype), h

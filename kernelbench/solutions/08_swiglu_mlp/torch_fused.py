"""SwiGLU with one up-projection GEMM over the concatenated W1/W3 weights, then an
in-place SiLU and an in-place gating multiply before the W2 projection."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        hidden = self.w1.out_features
        h = F.linear(x, torch.cat([self.w1.weight, self.w3.weight], dim=0))
        gate, up = h[..., :hidden], h[..., hidden:]
        return F.linear(F.silu(gate, inplace=True).mul_(up), self.w2.weight)

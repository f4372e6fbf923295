"""SwiGLU MLP with a gate module (F.silu of one projection times the other) built by a helper
class; the projections are created in the reference's order so a seed gives the same weights."""
# task: 08_swiglu_mlp
# backend: torch
import torch.nn as nn
import torch.nn.functional as F


class SwiGLUGate(nn.Module):
    def __init__(self, w1: nn.Linear, w3: nn.Linear):
        super().__init__()
        self.w1 = w1
        self.w3 = w3

    def forward(self, x):
        return F.silu(self.w1(x)) * self.w3(x)


class ModelNew(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        w3 = nn.Linear(dim, hidden_dim, bias=False)
        self.gate = SwiGLUGate(w1, w3)

    def forward(self, x):
        return self.w2(self.gate(x))

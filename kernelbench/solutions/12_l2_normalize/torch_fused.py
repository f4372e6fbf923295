"""L2 normalization with one fused vector-norm reduction and one division, instead of a
squaring pass, a sum, a square root and a clamp over full-size temporaries."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, eps=1e-12):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        norm = torch.linalg.vector_norm(x, ord=2, dim=-1, keepdim=True)
        return x / norm.clamp_min_(self.eps)

"""RMS norm in three passes: one sum-of-squares reduction (vector_norm) and two multiplies,
the second in place. (On CPU, F.rms_norm is decomposed into the same primitive ops as the
reference, so it gains nothing there; on GPU it would be the natural choice.)"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        sq_norm = torch.linalg.vector_norm(x, ord=2, dim=-1, keepdim=True).pow_(2)
        inv_rms = sq_norm.div_(x.shape[-1]).add_(self.eps).rsqrt_()
        # Scale by the weight out of place, then by inv_rms in place: under autograd an
        # in-place multiply by the (grad-requiring) weight would force a hidden copy.
        return torch.mul(x, self.weight).mul_(inv_rms)

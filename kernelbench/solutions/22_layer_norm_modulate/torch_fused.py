"""adaLN as one F.layer_norm per sample, with (1 + scale[i]) as the affine weight and shift[i]
as the affine bias: the modulation happens inside the fused layer-norm kernel, so each sample's
(tokens, dim) slab is read once and written once (a Python loop over the batch, batch launches)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, shift, scale):
        out = torch.empty_like(x)
        weight = 1.0 + scale
        for i in range(x.shape[0]):
            out[i] = F.layer_norm(x[i], (x.shape[-1],), weight[i], shift[i], self.eps)
        return out

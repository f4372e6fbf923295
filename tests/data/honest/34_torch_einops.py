"""Attention through F.scaled_dot_product_attention, with the heads folded into the batch by
einops (which upstream KernelBench references import too) and unfolded after."""
# task: 07_attention
# backend: torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange


class ModelNew(nn.Module):
    def forward(self, q, k, v):
        b = q.shape[0]
        q, k, v = (rearrange(t, "b h s d -> (b h) s d") for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v)
        return rearrange(out, "(b h) s d -> b h s d", b=b)

"""Causal attention through F.scaled_dot_product_attention(is_causal=True): the fused kernel
never materializes the masked score matrix and skips the masked half."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

"""Missing mask: fused attention without is_causal, so queries attend to future keys."""
import torch.nn as nn
import torch.nn.functional as F

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

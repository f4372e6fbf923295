"""Per-row cross-entropy with F.cross_entropy(reduction='none'): one fused log-softmax pass and
a gather instead of separate max, exp, sum, log and gather passes over the logits."""
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, reduction="none")

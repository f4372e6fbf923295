"""Per-row cross entropy as F.cross_entropy(reduction="none")."""
# task: 11_cross_entropy
# backend: torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, reduction="none")

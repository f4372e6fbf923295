"""Row softmax with torch.softmax; the class has a descriptive name and ModelNew is bound to it
by assignment (the loader only needs `ModelNew` to be a class)."""
# task: 01_softmax
# backend: torch
import torch
import torch.nn as nn


class FusedRowSoftmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


ModelNew = FusedRowSoftmax

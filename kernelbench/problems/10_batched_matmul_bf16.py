"""Batched matrix multiplication in bfloat16: C[i] = A[i] @ B[i] (single op, low precision).

Inputs and output are bfloat16 (the evaluator compares with atol = rtol = 1e-2); a candidate is
expected to accumulate in float32 and round once, as cuBLAS does. The reference is one torch.bmm
call (KernelBench level-1 style), so the room left is in the kernel itself (tensor cores, tiling).
B is scaled by 1/sqrt(K) before the cast so that C is O(1).
"""
import math

import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 32
M = 2048
K = 2048
N = 2048

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 8, "M": 256, "K": 256, "N": 256}}
SPLIT = "train"
KIND = "single_op"


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    a = torch.randn(batch_size, M, K).to(torch.bfloat16)
    b = (torch.randn(batch_size, K, N) / math.sqrt(K)).to(torch.bfloat16)
    return [a, b]


def get_init_inputs():
    return []

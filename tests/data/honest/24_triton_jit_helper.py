"""GELU (tanh) in Triton with the tanh written as a @triton.jit helper that the kernel calls (the
helper itself is never launched from Python, only inlined)."""
# task: 03_gelu_tanh
# backend: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x >= 0, t, -t)


@triton.jit
def _gelu_tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = 0.5 * x * (1.0 + _tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _gelu_tanh_kernel[(triton.cdiv(n, 2048),)](x, y, n, BLOCK=2048, num_warps=8)
        return y

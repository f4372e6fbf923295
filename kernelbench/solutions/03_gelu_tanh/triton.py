"""Tanh-approximate GELU in one Triton elementwise kernel: x read once, y written once.
Uses the identity 0.5 * (1 + tanh(u)) = sigmoid(2u), so gelu = x / (1 + exp(-2u)) with
u = sqrt(2/pi) * (x + 0.044715 x^3): one exp, no cancellation near zero."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_tanh(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tl.store(y_ptr + offs, x / (1.0 + tl.exp(-2.0 * u)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            _gelu_tanh[(triton.cdiv(n, 2048),)](x, y, n, BLOCK=2048, num_warps=8)
        return y

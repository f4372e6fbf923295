"""Mish in one Triton elementwise kernel: x read once, y written once. With e = exp(x),
tanh(log(1 + e)) = n / (n + 2) where n = e * (e + 2), one exp and no cancellation for negative
x; above x = 20 the factor is 1 to float32 precision, so x is returned (and exp never overflows
into inf / inf)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mish(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    e = tl.exp(tl.minimum(x, 20.0))
    num = e * (e + 2.0)
    y = tl.where(x > 20.0, x, x * num / (num + 2.0))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            _mish[(triton.cdiv(n, 2048),)](x, y, n, BLOCK=2048, num_warps=8)
        return y

"""Residual add + layer norm in one Triton kernel: one program per row forms h = x + residual
on the fly in a mean pass, a centred-variance pass and a write pass, so h is never written to
memory; float32 statistics."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_layer_norm_rows(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        acc += tl.load(x_ptr + base + start + offs, mask=mask, other=0.0) + \
            tl.load(r_ptr + base + start + offs, mask=mask, other=0.0)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        h = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0) + \
            tl.load(r_ptr + base + start + offs, mask=mask, other=0.0)
        d = tl.where(mask, h - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        h = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0) + \
            tl.load(r_ptr + base + start + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + start + offs, mask=mask, other=0.0)
        tl.store(y_ptr + base + start + offs, (h - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x, residual):
        x = x.contiguous()
        residual = residual.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        if rows:
            block = min(triton.next_power_of_2(cols), 4096)
            _add_layer_norm_rows[(rows,)](x, residual, self.weight.contiguous(), self.bias.contiguous(), y,
                                          cols, self.eps, BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return y

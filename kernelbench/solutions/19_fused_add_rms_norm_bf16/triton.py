"""Residual add + RMS norm for bfloat16 in one Triton kernel: one program per row; pass 1 forms
h = bf16(x + residual), writes it (the new residual) and accumulates sum(h^2) in float32; pass 2
recomputes h from the inputs and writes bf16(h * rsqrt(mean + eps) * weight). No float32
temporaries are written, against about eight passes in the reference."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_rms_norm_bf16(x_ptr, r_ptr, w_ptr, out_ptr, h_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        h = (x + r).to(tl.bfloat16)
        tl.store(h_ptr + base + start + offs, h, mask=mask)
        hf = h.to(tl.float32)
        acc += hf * hf
    inv_rms = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        x = tl.load(x_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + base + start + offs, mask=mask, other=0.0).to(tl.float32)
        hf = (x + r).to(tl.bfloat16).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        tl.store(out_ptr + base + start + offs, (hf * inv_rms * w).to(tl.bfloat16), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x, residual):
        x = x.contiguous()
        residual = residual.contiguous()
        out = torch.empty_like(x)
        h = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        if rows:
            block = min(triton.next_power_of_2(cols), 4096)
            _add_rms_norm_bf16[(rows,)](x, residual, self.weight.contiguous(), out, h, cols, self.eps,
                                        BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return out, h

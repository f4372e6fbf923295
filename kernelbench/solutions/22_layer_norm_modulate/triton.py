"""adaLN in one Triton kernel: one program per token row; a mean pass, a centred-variance pass
and a write pass applying (1 + scale[b]) and shift[b], so the normalized tensor is never written
to memory. Float32 statistics."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _ln_modulate(x_ptr, shift_ptr, scale_ptr, y_ptr, tokens, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    cond = (row // tokens) * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        acc += tl.load(x_row + start + offs, mask=start + offs < cols, other=0.0)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        d = tl.where(mask, tl.load(x_row + start + offs, mask=mask, other=0.0) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        v = tl.load(x_row + start + offs, mask=mask, other=0.0)
        sc = tl.load(scale_ptr + cond + start + offs, mask=mask, other=0.0)
        sh = tl.load(shift_ptr + cond + start + offs, mask=mask, other=0.0)
        tl.store(y_row + start + offs, (v - mean) * rstd * (1.0 + sc) + sh, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, shift, scale):
        x = x.contiguous()
        y = torch.empty_like(x)
        batch, tokens, cols = x.shape
        rows = batch * tokens
        if rows and cols:
            block = min(triton.next_power_of_2(cols), 4096)
            _ln_modulate[(rows,)](x, shift.contiguous(), scale.contiguous(), y, tokens, cols, self.eps,
                                  BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return y

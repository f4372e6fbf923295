"""RMS norm in one Triton kernel: one program per row, a sum-of-squares pass and a write pass
over column blocks (x read twice, y written once) instead of the reference's five passes."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rms_norm_rows(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        v = tl.load(x_row + start + offs, mask=start + offs < cols, other=0.0)
        acc += v * v
    inv_rms = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        v = tl.load(x_row + start + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        tl.store(y_row + start + offs, v * inv_rms * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        if rows:
            block = min(triton.next_power_of_2(cols), 4096)
            _rms_norm_rows[(rows,)](x, self.weight.contiguous(), y, cols, self.eps,
                                    BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return y

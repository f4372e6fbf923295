"""Row softmax in one Triton kernel: one program per row, an online (running max, running sum)
pass over column blocks and a write pass, so x is read twice and y written once instead of the
reference's eight or so full passes. Statistics are kept in float32.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    y_row = y_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        v = tl.load(x_row + start + offs, mask=start + offs < cols, other=float("-inf"))
        m_new = tl.maximum(m, v)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)  # keep exp() finite on empty lanes
        s = s * tl.exp(m - shift) + tl.exp(v - shift)
        m = m_new
    row_max = tl.max(m, axis=0)
    shift = tl.where(row_max == float("-inf"), 0.0, row_max)
    inv = 1.0 / tl.sum(s * tl.exp(m - shift), axis=0)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        v = tl.load(x_row + start + offs, mask=mask, other=float("-inf"))
        tl.store(y_row + start + offs, tl.exp(v - shift) * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        if rows:
            block = min(triton.next_power_of_2(cols), 4096)
            _softmax_rows[(rows,)](x, y, cols, BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return y

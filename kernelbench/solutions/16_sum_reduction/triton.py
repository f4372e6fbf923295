"""Sum over the middle dimension of (B, R, C) in one Triton kernel: a program owns a block of
output columns of one batch and walks R in (BLOCK_R x BLOCK_C) tiles whose rows are contiguous
in memory (coalesced), accumulating a float32 tile and reducing it over R at the end."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sum_dim1(x_ptr, y_ptr, reduce, inner, col_blocks, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)  # flattened (batch, column block) grid
    b = pid // col_blocks
    cols = (pid % col_blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
    rows = tl.arange(0, BLOCK_R)
    base = x_ptr + b * reduce * inner
    acc = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    for start in range(0, reduce, BLOCK_R):
        r = start + rows
        mask = (r[:, None] < reduce) & (cols[None, :] < inner)
        acc += tl.load(base + r[:, None].to(tl.int64) * inner + cols[None, :], mask=mask, other=0.0)
    tl.store(y_ptr + b * inner + cols, tl.sum(acc, axis=0), mask=cols < inner)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        batch, reduce, inner = x.shape
        y = torch.empty(batch, inner, device=x.device, dtype=x.dtype)
        if y.numel():
            block_c = min(triton.next_power_of_2(inner), 128)
            col_blocks = triton.cdiv(inner, block_c)
            _sum_dim1[(batch * col_blocks,)](x, y, reduce, inner, col_blocks, BLOCK_R=32, BLOCK_C=block_c,
                                             num_warps=4)
        return y

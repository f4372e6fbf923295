"""Off-by-one indexing: the gate half is read one column early (half - 1 + col), so every
output multiplies by its left neighbour's b."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = True


@triton.jit
def _geglu(x_ptr, y_ptr, half, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < half
    a = tl.load(x_ptr + row * 2 * half + cols, mask=mask, other=0.0)
    b = tl.load(x_ptr + row * 2 * half + half - 1 + cols, mask=mask, other=0.0)
    y = 0.5 * a * (1.0 + tl.erf(a * 0.7071067811865476)) * b
    tl.store(y_ptr + row * half + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        half = x.shape[-1] // 2
        y = torch.empty(*x.shape[:-1], half, device=x.device, dtype=x.dtype)
        rows = y.numel() // half if half else 0
        if rows:
            block = min(triton.next_power_of_2(half), 1024)
            _geglu[(rows, triton.cdiv(half, block))](x, y, half, BLOCK=block, num_warps=4)
        return y

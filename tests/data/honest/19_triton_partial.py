"""Row L2 normalisation in Triton; the launch configuration is bound once with functools.partial
(kernel[grid] is itself a callable) and forward calls the partial."""
# task: 12_l2_normalize
# backend: triton
import functools

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2_normalize_rows(x_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
        acc += v * v
    inv = 1.0 / tl.maximum(tl.sqrt(tl.sum(acc, axis=0)), eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
        tl.store(y_ptr + row * cols + offs, v * inv, mask=offs < cols)


class ModelNew(nn.Module):
    def __init__(self, eps=1e-12):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols
        launch = functools.partial(l2_normalize_rows[(rows,)], BLOCK=min(triton.next_power_of_2(cols), 2048),
                                   num_warps=8)
        launch(x, y, cols, self.eps)
        return y

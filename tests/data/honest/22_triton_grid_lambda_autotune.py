"""Sum over dim 1 of (B, R, I) in Triton: autotuned block sizes, a grid lambda reading the chosen
BLOCK_I from the meta-parameters, coalesced loads along the inner dim."""
# task: 16_sum_reduction
# backend: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK_I": b, "BLOCK_R": r}, num_warps=w) for b, r, w in [(64, 32, 4), (128, 16, 4), (256, 8, 8)]],
    key=["R", "I"],
)
@triton.jit
def sum_mid_dim(x_ptr, y_ptr, R, I, BLOCK_I: tl.constexpr, BLOCK_R: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    offs_i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    acc = tl.zeros([BLOCK_I], tl.float32)
    for r0 in range(0, R, BLOCK_R):
        offs_r = r0 + tl.arange(0, BLOCK_R)
        ptrs = x_ptr + b * R * I + offs_r[:, None] * I + offs_i[None, :]
        tile = tl.load(ptrs, mask=(offs_r[:, None] < R) & (offs_i[None, :] < I), other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(y_ptr + b * I + offs_i, acc, mask=offs_i < I)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        B, R, I = x.shape
        y = torch.empty(B, I, device=x.device, dtype=x.dtype)
        grid = lambda meta: (B, triton.cdiv(I, meta["BLOCK_I"]))  # noqa: E731
        sum_mid_dim[grid](x, y, R, I)
        return y

"""Wrong dtype: allocates and stores the float32 accumulator as the output instead of
rounding it to bfloat16 like the reference."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = True


@triton.jit
def _bmm(a_ptr, b_ptr, c_ptr, M, N, K, sab, sam, sak, sbb, sbk, sbn,
         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    tiles_n = tl.cdiv(N, BLOCK_N)
    tiles = tl.cdiv(M, BLOCK_M) * tiles_n
    batch = pid // tiles
    tile = pid % tiles
    offs_m = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + batch * sab + offs_m[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + batch * sbb + offs_k[:, None] * sbk + offs_n[None, :] * sbn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (k0 + offs_k[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k0 + offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    c_ptrs = c_ptr + batch * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        batch, M, K = a.shape
        N = b.shape[2]
        c = torch.empty(batch, M, N, device=a.device, dtype=torch.float32)
        if c.numel() == 0:
            return c
        if K == 0:
            return c.zero_()
        grid = (batch * triton.cdiv(M, 128) * triton.cdiv(N, 128),)
        _bmm[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                   num_warps=8, num_stages=3)
        return c

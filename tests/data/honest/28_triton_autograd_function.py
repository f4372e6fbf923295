"""RoPE on q and k in one Triton kernel (both tensors per program, cos/sin computed in-kernel from
inv_freq), wrapped in a torch.autograd.Function."""
# task: 18_rope_qk
# backend: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rotate(src, dst, base, i, cos, sin, HALF: tl.constexpr):
    x1 = tl.load(src + base + i)
    x2 = tl.load(src + base + HALF + i)
    tl.store(dst + base + i, x1 * cos - x2 * sin)
    tl.store(dst + base + HALF + i, x2 * cos + x1 * sin)


@triton.jit
def _rope(q_ptr, k_ptr, qo_ptr, ko_ptr, inv_freq_ptr, seq, HALF: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # one (b, h, t) row of head_dim
    pos = (row % seq).to(tl.float32)
    i = tl.arange(0, HALF)
    ang = pos * tl.load(inv_freq_ptr + i)
    cos = tl.cos(ang)
    sin = tl.sin(ang)
    base = row * 2 * HALF
    _rotate(q_ptr, qo_ptr, base, i, cos, sin, HALF)
    _rotate(k_ptr, ko_ptr, base, i, cos, sin, HALF)


class Rope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, inv_freq):
        q, k = q.contiguous(), k.contiguous()
        qo, ko = torch.empty_like(q), torch.empty_like(k)
        rows = q.numel() // q.shape[-1]
        _rope[(rows,)](q, k, qo, ko, inv_freq, q.shape[-2], HALF=q.shape[-1] // 2)
        return qo, ko


class ModelNew(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q, k):
        return Rope.apply(q, k, self.inv_freq)

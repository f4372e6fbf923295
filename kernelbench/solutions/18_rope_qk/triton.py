"""RoPE on q and k in one Triton kernel: one program per block of (batch, head, position) rows
loads both halves of q and k, rotates them with half-width cos / sin tables and writes the
results, so q and k are read once and written once. The tables (seq_len x head_dim/2, tiny
next to q and k) are built with torch's precise cos / sin from the same float32 angles as the
reference; the kernel avoids the reference's full-width tables, rotate_half copies and cat."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rope_qk(q_ptr, k_ptr, cos_ptr, sin_ptr, qo_ptr, ko_ptr, rows, seq_len, half,
             ROWS: tl.constexpr, HALF: tl.constexpr):
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    j = tl.arange(0, HALF)[None, :]
    mask = (r < rows) & (j < half)
    pos = r % seq_len
    c = tl.load(cos_ptr + pos * half + j, mask=mask, other=0.0)
    s = tl.load(sin_ptr + pos * half + j, mask=mask, other=0.0)
    lo = r * 2 * half + j
    q1 = tl.load(q_ptr + lo, mask=mask, other=0.0)
    q2 = tl.load(q_ptr + lo + half, mask=mask, other=0.0)
    tl.store(qo_ptr + lo, q1 * c - q2 * s, mask=mask)
    tl.store(qo_ptr + lo + half, q2 * c + q1 * s, mask=mask)
    k1 = tl.load(k_ptr + lo, mask=mask, other=0.0)
    k2 = tl.load(k_ptr + lo + half, mask=mask, other=0.0)
    tl.store(ko_ptr + lo, k1 * c - k2 * s, mask=mask)
    tl.store(ko_ptr + lo + half, k2 * c + k1 * s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q, k):
        q = q.contiguous()
        k = k.contiguous()
        seq_len, head_dim = q.shape[-2], q.shape[-1]
        half = head_dim // 2
        freqs = torch.outer(torch.arange(seq_len, device=q.device, dtype=torch.float32), self.inv_freq)
        cos, sin = freqs.cos().contiguous(), freqs.sin().contiguous()
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        rows = q.numel() // head_dim if head_dim else 0
        if rows:
            block_half = triton.next_power_of_2(half)
            rows_per_prog = max(1, 2048 // block_half)
            _rope_qk[(triton.cdiv(rows, rows_per_prog),)](q, k, cos, sin, q_out, k_out, rows, seq_len, half,
                                                          ROWS=rows_per_prog, HALF=block_half, num_warps=4)
        return q_out, k_out

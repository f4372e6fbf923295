"""Non-causal attention as a Triton flash-attention kernel: one program per (batch * head,
64-query tile) streams K / V in 32-key tiles, computes scores with tl.dot, keeps an online
float32 softmax (running max and sum) and accumulates P V in registers, so the seq x seq score
matrix is never written to memory. input_precision="ieee" (no TF32) keeps it within float32
rounding of the reference. Any head_dim (padded to a power of two with masks)."""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _attention(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, head_dim, q_tiles, scale, CAUSAL: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)  # flattened (batch * head, query tile)
    head = pid // q_tiles
    q_tile = pid % q_tiles
    base = head * seq_len * head_dim
    offs_m = q_tile * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < head_dim
    q = tl.load(q_ptr + base + offs_m[:, None] * head_dim + offs_d[None, :],
                mask=(offs_m[:, None] < seq_len) & d_mask[None, :], other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    hi = seq_len
    if CAUSAL:
        hi = tl.minimum(seq_len, (q_tile + 1) * BLOCK_M)
    for start in range(0, hi, BLOCK_N):
        kn = start + offs_n
        kt = tl.load(k_ptr + base + kn[None, :] * head_dim + offs_d[:, None],
                     mask=(kn[None, :] < seq_len) & d_mask[:, None], other=0.0)  # (BLOCK_D, BLOCK_N)
        s = tl.dot(q, kt, input_precision="ieee") * scale
        valid = kn[None, :] < seq_len
        if CAUSAL:
            valid = valid & (kn[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - shift)
        p = tl.exp(s - shift[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + kn[:, None] * head_dim + offs_d[None, :],
                    mask=(kn[:, None] < seq_len) & d_mask[None, :], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * head_dim + offs_d[None, :], out,
             mask=(offs_m[:, None] < seq_len) & d_mask[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        seq_len, head_dim = q.shape[-2], q.shape[-1]
        o = torch.empty_like(q)
        heads = q.numel() // (seq_len * head_dim) if seq_len and head_dim else 0
        if heads:
            block_m = 64
            q_tiles = triton.cdiv(seq_len, block_m)
            _attention[(heads * q_tiles,)](q, k, v, o, seq_len, head_dim, q_tiles, 1.0 / math.sqrt(head_dim),
                                           CAUSAL=False, BLOCK_M=block_m, BLOCK_N=32,
                                           BLOCK_D=max(16, triton.next_power_of_2(head_dim)), num_warps=4,
                                           num_stages=2)
        return o

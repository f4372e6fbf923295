"""Rotary position embedding (RoPE) applied to queries and keys (fusion, attention piece).

The reference follows the common Hugging Face formulation: it builds the cos / sin tables from
the positions and the inverse frequencies on every call, then computes
x * cos + rotate_half(x) * sin for q and for k, where rotate_half(x) = cat(-x2, x1) splits the
head dimension in halves. Each of those steps is a separate full-size pass.
Inputs: q and k of shape (batch, heads, seq_len, head_dim); returns (q_rotated, k_rotated).
The inverse frequencies are a deterministic buffer (base 10000), not a parameter.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 8
num_heads = 32
seq_len = 2048
head_dim = 128

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 2, "num_heads": 8, "seq_len": 512, "head_dim": 64}}
SPLIT = "train"
KIND = "fusion"


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Model(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q, k):
        positions = torch.arange(q.shape[-2], device=q.device, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)  # (seq_len, head_dim / 2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (seq_len, head_dim)
        cos, sin = emb.cos(), emb.sin()
        q_rot = q * cos + rotate_half(q) * sin
        k_rot = k * cos + rotate_half(k) * sin
        return q_rot, k_rot


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [head_dim]

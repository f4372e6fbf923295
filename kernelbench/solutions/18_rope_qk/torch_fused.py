"""RoPE on the half-split layout without torch.cat: with x = (x1, x2) and per-position (c, s)
of half width, the output halves are x1*c - x2*s and x2*c + x1*s, written straight into one
output per tensor with addcmul, and the tables are built at half width."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @staticmethod
    def _rotate(x, cos, sin):
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        out = torch.empty_like(x)
        torch.mul(x1, cos, out=out[..., :half]).addcmul_(x2, sin, value=-1.0)
        torch.mul(x2, cos, out=out[..., half:]).addcmul_(x1, sin)
        return out

    def forward(self, q, k):
        positions = torch.arange(q.shape[-2], device=q.device, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)
        cos, sin = freqs.cos(), freqs.sin()
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)

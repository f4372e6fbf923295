"""RoPE with the cos/sin tables cached per (length, device) in a dict, and the rotation done as
two fused multiply-adds on the halves (no rotate_half concatenation)."""
# task: 18_rope_qk
# backend: torch
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._tables = {}

    def _cos_sin(self, length, device):
        key = (length, str(device))
        if key not in self._tables:
            freqs = torch.outer(torch.arange(length, device=device, dtype=torch.float32), self.inv_freq)
            self._tables[key] = (freqs.cos(), freqs.sin())
        return self._tables[key]

    def _rotate(self, x, cos, sin):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def forward(self, q, k):
        cos, sin = self._cos_sin(q.shape[-2], q.device)
        return self._rotate(q, cos, sin), self._rotate(k, cos, sin)

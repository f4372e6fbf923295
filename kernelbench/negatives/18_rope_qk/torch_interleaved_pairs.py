"""Wrong convention: rotates adjacent pairs (x0, x1), (x2, x3), ... (GPT-J style) where the
task rotates the two halves of the head dimension (NeoX / Hugging Face style)."""
import torch
import torch.nn as nn

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = False


class ModelNew(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q, k):
        positions = torch.arange(q.shape[-2], device=q.device, dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)
        cos, sin = freqs.cos(), freqs.sin()

        def rotate(x):
            x1, x2 = x[..., 0::2], x[..., 1::2]
            return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)

        return rotate(q), rotate(k)

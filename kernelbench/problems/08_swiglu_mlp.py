"""SwiGLU feed-forward block: W2(silu(x W1^T) * (x W3^T)) (fusion).

The reference uses three bias-free nn.Linear layers and spells out SiLU as
h / (1 + exp(-h)), so it runs two separate up-projection GEMMs and several
elementwise passes before the down projection.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 4096   # tokens
dim = 4096
hidden_dim = 11008

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 1024, "dim": 64, "hidden_dim": 256}}
SPLIT = "heldout"
KIND = "fusion"


class Model(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        h1 = self.w1(x)
        gate = h1 / (1.0 + torch.exp(-h1))
        return self.w2(gate * self.w3(x))


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, hidden_dim]

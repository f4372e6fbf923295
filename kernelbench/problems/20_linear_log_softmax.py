"""Linear layer (GEMM + bias) followed by log-softmax over the output features (fusion).

A classifier head: the reference runs nn.Linear and then a hand-written stable log-softmax
(max, subtract, exp, sum, log, subtract), so the (batch, out_features) logits make several
extra passes over memory after the GEMM.
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 4096
in_features = 1024
out_features = 8192

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 256, "in_features": 128, "out_features": 1024}}
SPLIT = "train"
KIND = "fusion"


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        logits = self.linear(x)
        shifted = logits - logits.amax(dim=-1, keepdim=True)
        return shifted - torch.log(torch.exp(shifted).sum(dim=-1, keepdim=True))


def get_inputs():
    return [torch.randn(batch_size, in_features) * 4.0]


def get_init_inputs():
    return [in_features, out_features]

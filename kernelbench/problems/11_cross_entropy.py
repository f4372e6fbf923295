"""Per-row cross-entropy loss from logits and integer class targets (single op, softmax-like).

The reference computes loss[i] = logsumexp(logits[i]) - logits[i, target[i]] with an explicit
max, exp, sum, log and gather, the way the formula is written by hand, so the (batch, vocab)
logits are read and written several times. reduction='none': one loss per row, shape (batch,).
The targets are int64 class indices in [0, vocab).
"""
import torch
import torch.nn as nn

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 4096
vocab_size = 32768

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 512, "vocab_size": 2048}}
SPLIT = "heldout"
KIND = "single_op"


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        row_max = logits.amax(dim=-1, keepdim=True)
        sum_exp = torch.exp(logits - row_max).sum(dim=-1)
        lse = torch.log(sum_exp) + row_max.squeeze(-1)
        picked = logits.gather(1, targets.unsqueeze(1)).squeeze(1)
        return lse - picked


def get_inputs():
    logits = torch.randn(batch_size, vocab_size) * 2.0
    targets = torch.randint(0, vocab_size, (batch_size,))
    return [logits, targets]


def get_init_inputs():
    return []

"""Causal depthwise 1-D convolution with bias, as in Mamba-style blocks (single op, conv).

out[b, c, t] = bias[c] + sum_k weight[c, 0, k] * x[b, c, t - (K-1) + k], with zeros before t = 0.
The parameters live in an nn.Conv1d(groups=channels) so a candidate can create the same module;
the reference evaluates the taps as K shifted multiply-adds over a left-padded copy, one
full-size pass per tap.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

# GPU-sized shape (KernelBench convention: module-level constants read by get_inputs()).
batch_size = 4
channels = 4096
seq_len = 8192
kernel_size = 4

# WARP-K metadata, read by the task loader with ast.literal_eval (must be plain literals, never executed there).
SHAPES = {"cpu": {"batch_size": 2, "channels": 256, "seq_len": 2048, "kernel_size": 4}}
SPLIT = "train"
KIND = "single_op"


class Model(nn.Module):
    def __init__(self, channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel_size, groups=channels, bias=True)

    def forward(self, x):
        k = self.conv.kernel_size[0]
        length = x.shape[-1]
        padded = F.pad(x, (k - 1, 0))
        weight = self.conv.weight[:, 0, :]  # (channels, k)
        out = self.conv.bias[:, None].expand_as(x)
        for tap in range(k):
            out = out + padded[..., tap:tap + length] * weight[:, tap, None]
        return out


def get_inputs():
    return [torch.randn(batch_size, channels, seq_len)]


def get_init_inputs():
    return [channels, kernel_size]

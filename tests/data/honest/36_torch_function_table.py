"""Mish through a table of activation functions selected by name in __init__ (a config-style
idiom): F.mish is one fused op."""
# task: 14_mish
# backend: torch
import torch
import torch.nn as nn
import torch.nn.functional as F

ACTIVATIONS = {"mish": F.mish, "gelu": F.gelu, "silu": F.silu, "identity": torch.clone}


class ModelNew(nn.Module):
    def __init__(self, activation="mish"):
        super().__init__()
        self.act = ACTIVATIONS[activation]

    def forward(self, x):
        return self.act(x)

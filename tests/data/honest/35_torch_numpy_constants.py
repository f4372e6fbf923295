"""GELU (tanh) in fewer passes: the constant sqrt(2/pi) from numpy, x**3 as x*x*x, tanh in place."""
# task: 03_gelu_tanh
# backend: torch
import numpy as np
import torch
import torch.nn as nn

SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


class ModelNew(nn.Module):
    def forward(self, x):
        inner = (x + 0.044715 * x * x * x) * SQRT_2_OVER_PI
        return 0.5 * x * (1.0 + torch.tanh_(inner))

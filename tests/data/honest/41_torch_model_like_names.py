"""Matmul through a helper base class; names that merely contain "Model" (ModelNewBase,
MatmulModelConfig, the docstring's "Model") are not the reference Model."""
# task: 09_matmul
# backend: torch
from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass(frozen=True)
class MatmulModelConfig:
    allow_tf32: bool = False


class ModelNewBase(nn.Module):
    """Shared plumbing of the ModelNew variants; unlike the task's Model it keeps a config."""

    def __init__(self, config: MatmulModelConfig):
        super().__init__()
        self.config = config


class ModelNew(ModelNewBase):
    def __init__(self):
        super().__init__(MatmulModelConfig())

    def forward(self, a, b):
        return torch.mm(a, b)

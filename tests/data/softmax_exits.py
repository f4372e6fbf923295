"""Kills its own process from forward with os._exit(0): the worker must not report 'ok'."""
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(0)
        return torch.softmax(x, dim=-1)

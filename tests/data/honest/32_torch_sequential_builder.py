"""Linear + log-softmax as an nn.Sequential made by a builder function."""
# task: 20_linear_log_softmax
# backend: torch
import torch.nn as nn


def make_head(in_features: int, out_features: int) -> nn.Sequential:
    layers = [nn.Linear(in_features, out_features)]
    layers.append(nn.LogSoftmax(dim=-1))
    return nn.Sequential(*layers)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.head = make_head(in_features, out_features)

    def forward(self, x):
        return self.head(x)

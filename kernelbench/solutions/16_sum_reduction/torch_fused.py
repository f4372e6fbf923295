"""Sum over the middle dimension with torch.sum: the task is already one reduction, so this only
shows the task is solvable and sets the baseline (speedup about 1). On GPU a custom kernel gains
by splitting the reduced dimension across blocks while coalescing over the inner dimension."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=1)

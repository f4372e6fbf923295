"""Layer norm + modulate with F.layer_norm and one addcmul, the modulate step a TorchScript
function (@torch.jit.script is PyTorch, not a Triton kernel)."""
# task: 22_layer_norm_modulate
# backend: torch
import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.jit.script
def modulate(normed: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(shift.unsqueeze(1), normed, 1.0 + scale.unsqueeze(1))


class ModelNew(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, shift, scale):
        return modulate(F.layer_norm(x, (x.shape[-1],), eps=self.eps), shift, scale)

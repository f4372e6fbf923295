"""Layer norm + modulate in Triton; a generic row launcher takes the kernel as an argument (the
kernel is named in forward only as a value passed to the helper)."""
# task: 22_layer_norm_modulate
# backend: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def ln_modulate_kernel(x_ptr, shift_ptr, scale_ptr, y_ptr, tokens, dim, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    b = row // tokens
    offs = tl.arange(0, BLOCK)
    mask = offs < dim
    x = tl.load(x_ptr + row * dim + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / dim
    xc = tl.where(mask, x - mean, 0.0)
    inv = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / dim + eps)
    shift = tl.load(shift_ptr + b * dim + offs, mask=mask, other=0.0)
    scale = tl.load(scale_ptr + b * dim + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * dim + offs, xc * inv * (1.0 + scale) + shift, mask=mask)


def launch_rows(kernel, x, *args, **meta):
    y = torch.empty_like(x)
    rows = x.numel() // x.shape[-1]
    kernel[(rows,)](x, *args, y, x.shape[1], x.shape[-1], **meta, BLOCK=triton.next_power_of_2(x.shape[-1]))
    return y


class ModelNew(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, shift, scale):
        return launch_rows(ln_modulate_kernel, x.contiguous(), shift.contiguous(), scale.contiguous(),
                           eps=self.eps)

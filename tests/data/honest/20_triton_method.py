"""RMS norm in Triton; a small launcher object keeps the kernel as an attribute and its method
launches it (self.kernel[grid](...))."""
# task: 04_rms_norm
# backend: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / cols + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * cols + offs, x * inv * w, mask=mask)


class RowLauncher:
    def __init__(self, kernel, num_warps=4):
        self.kernel = kernel
        self.num_warps = num_warps

    def launch(self, x, weight, eps):
        x = x.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        self.kernel[(x.numel() // cols,)](x, weight, y, cols, eps, BLOCK=triton.next_power_of_2(cols),
                                          num_warps=self.num_warps)
        return y


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.rms = RowLauncher(rms_norm_kernel, num_warps=8)

    def forward(self, x):
        return self.rms.launch(x, self.weight, self.eps)

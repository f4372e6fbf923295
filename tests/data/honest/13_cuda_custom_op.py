"""Mish in one CUDA kernel, registered as a torch.library custom op (the PyTorch 2 way to make an
extension visible to the dispatcher); forward calls the op through torch.ops."""
# task: 14_mish
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
__global__ void k(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) { const float v = x[i]; y[i] = v * tanhf(v > 20.f ? v : log1pf(__expf(v))); }
}
torch::Tensor mish_forward(torch::Tensor x) {
    auto y = torch::empty_like(x); const int64_t n = x.numel();
    k<<<(n + 1023) / 1024, 1024>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
_lib = load_inline("honest13_mish", "torch::Tensor mish_forward(torch::Tensor x);", _SRC,
                   functions=["mish_forward"])


@torch.library.custom_op("honest13::mish", mutates_args=())
def mish(x: torch.Tensor) -> torch.Tensor:
    return _lib.mish_forward(x.contiguous())


@mish.register_fake
def _(x):
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ops.honest13.mish(x)

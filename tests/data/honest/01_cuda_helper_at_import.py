"""GELU (tanh) in one CUDA kernel; the extension is built by a helper function called once at
module level (the style many LLM candidates use to keep the build arguments in one place)."""
# task: 03_gelu_tanh
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor gelu_tanh(torch::Tensor x);"

_CUDA = r"""
#include <torch/extension.h>
__global__ void gelu_tanh_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        const float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.f + tanhf(inner));
    }
}
torch::Tensor gelu_tanh(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n) gelu_tanh_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""


def _build():
    return load_inline(
        name="honest01_gelu_tanh",
        cpp_sources=_CPP,
        cuda_sources=_CUDA,
        functions=["gelu_tanh"],
        extra_cuda_cflags=["-O3", "--use_fast_math"],
        verbose=False,
    )


_ext = _build()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.gelu_tanh(x)

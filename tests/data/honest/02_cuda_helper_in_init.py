"""Mish in one CUDA kernel; the extension is built lazily by a helper called in ModelNew.__init__
and kept on the module (nothing is compiled at import)."""
# task: 14_mish
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

MISH_CUDA = r"""
#include <torch/extension.h>
__global__ void mish_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        const float v = x[i];
        const float sp = v > 20.f ? v : log1pf(expf(v));
        y[i] = v * tanhf(sp);
    }
}
torch::Tensor mish(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n) mish_kernel<<<(n + 511) / 512, 512>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
MISH_CPP = "torch::Tensor mish(torch::Tensor x);"


def build_mish_extension(name: str = "honest02_mish"):
    """Compile (or load from the build cache) the Mish extension."""
    return load_inline(name=name, cpp_sources=MISH_CPP, cuda_sources=MISH_CUDA, functions=["mish"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = build_mish_extension()

    def forward(self, x):
        return self.ext.mish(x)

"""Sum over dim 1 of a (B, R, I) tensor in one CUDA kernel (one thread per output, coalesced over
the inner dim); the kernel entry point is picked by name with getattr on the extension."""
# task: 16_sum_reduction
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>
__global__ void sum_mid(const float* x, float* y, int64_t b, int64_t r, int64_t inner) {
    int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (o >= b * inner) return;
    const int64_t bi = o / inner, ii = o % inner;
    const float* p = x + bi * r * inner + ii;
    float acc = 0.f;
    for (int64_t k = 0; k < r; ++k) acc += p[k * inner];
    y[o] = acc;
}
torch::Tensor sum_dim1_float32(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(0), xc.size(2)}, xc.options());
    const int64_t n = y.numel();
    sum_mid<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1), xc.size(2));
    return y;
}
"""

_sum = load_inline(name="honest09_sum_dim1", cpp_sources="torch::Tensor sum_dim1_float32(torch::Tensor x);",
                   cuda_sources=SRC, functions=["sum_dim1_float32"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        kernel = getattr(_sum, "sum_dim1_" + str(x.dtype).removeprefix("torch."))
        return kernel(x)

"""GEGLU in one CUDA kernel (erf GELU of the first half times the second half); forward calls
a closure made by a factory that captured the extension."""
# task: 23_geglu
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

GEGLU = r"""
#include <torch/extension.h>
__global__ void geglu_kernel(const float* x, float* y, int64_t rows, int64_t dim) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= rows * dim) return;
    const int64_t r = i / dim, c = i % dim;
    const float a = x[r * 2 * dim + c], b = x[r * 2 * dim + dim + c];
    y[i] = 0.5f * a * (1.f + erff(a * 0.70710678f)) * b;
}
torch::Tensor geglu(torch::Tensor x) {
    auto xc = x.contiguous();
    const int64_t dim = xc.size(-1) / 2, rows = xc.numel() / xc.size(-1);
    auto y = torch::empty({rows, dim}, xc.options());
    geglu_kernel<<<(rows * dim + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), rows, dim);
    return y;
}
"""


def make_geglu(name):
    ext = load_inline(name=name, cpp_sources="torch::Tensor geglu(torch::Tensor x);", cuda_sources=GEGLU,
                      functions=["geglu"])

    def run(x):
        out = ext.geglu(x)
        return out.view(*x.shape[:-1], x.shape[-1] // 2)

    return run


geglu = make_geglu("honest08_geglu")


class ModelNew(nn.Module):
    def forward(self, x):
        return geglu(x)

"""Layer norm as two extensions built in a dict comprehension (row statistics, then the affine
normalisation), one kernel each; forward looks both up by name."""
# task: 02_layer_norm
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCES = {
    "stats": (
        "torch::Tensor row_stats(torch::Tensor x, double eps);",
        r"""
#include <torch/extension.h>
__global__ void stats_kernel(const float* x, float* out, int64_t cols, float eps) {
    __shared__ float s1[256], s2[256];
    const float* xr = x + blockIdx.x * cols;
    float a = 0.f, b = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) { a += xr[c]; b += xr[c] * xr[c]; }
    s1[threadIdx.x] = a; s2[threadIdx.x] = b; __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) { s1[threadIdx.x] += s1[threadIdx.x + k]; s2[threadIdx.x] += s2[threadIdx.x + k]; }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const float mean = s1[0] / cols;
        out[2 * blockIdx.x] = mean;
        out[2 * blockIdx.x + 1] = rsqrtf(s2[0] / cols - mean * mean + eps);
    }
}
torch::Tensor row_stats(torch::Tensor x, double eps) {
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    auto out = torch::empty({rows, 2}, x.options());
    stats_kernel<<<rows, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), cols, (float)eps);
    return out;
}
""",
    ),
    "apply": (
        "torch::Tensor apply_norm(torch::Tensor x, torch::Tensor stats, torch::Tensor w, torch::Tensor b);",
        r"""
#include <torch/extension.h>
__global__ void apply_kernel(const float* x, const float* st, const float* w, const float* b, float* y,
                             int64_t n, int64_t cols) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t r = i / cols, c = i % cols;
    y[i] = (x[i] - st[2 * r]) * st[2 * r + 1] * w[c] + b[c];
}
torch::Tensor apply_norm(torch::Tensor x, torch::Tensor stats, torch::Tensor w, torch::Tensor b) {
    auto y = torch::empty_like(x);
    const int64_t n = x.numel();
    apply_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), stats.data_ptr<float>(), w.data_ptr<float>(),
                                          b.data_ptr<float>(), y.data_ptr<float>(), n, x.size(-1));
    return y;
}
""",
    ),
}
FUNCTIONS = {"stats": ["row_stats"], "apply": ["apply_norm"]}

EXTENSIONS = {
    key: load_inline(name=f"honest12_ln_{key}", cpp_sources=cpp, cuda_sources=cuda, functions=FUNCTIONS[key])
    for key, (cpp, cuda) in SOURCES.items()
}


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        stats = EXTENSIONS["stats"].row_stats(x, self.eps)
        return EXTENSIONS["apply"].apply_norm(x, stats, self.weight, self.bias)

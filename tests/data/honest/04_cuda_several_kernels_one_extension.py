"""Residual add + layer norm as two kernels of one extension: an elementwise add, then a row
layer norm (one block per row). Both functions are exported and called from forward."""
# task: 06_residual_add_layer_norm
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor residual_add(torch::Tensor x, torch::Tensor r);
torch::Tensor layer_norm_rows(torch::Tensor h, torch::Tensor w, torch::Tensor b, double eps);
"""

cuda_source = r"""
#include <torch/extension.h>
__global__ void add_kernel(const float* a, const float* b, float* c, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
__global__ void ln_kernel(const float* h, const float* w, const float* b, float* y, int64_t cols, float eps) {
    extern __shared__ float buf[];
    const float* hr = h + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float s = 0.f, ss = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) { s += hr[c]; ss += hr[c] * hr[c]; }
    buf[threadIdx.x] = s; buf[blockDim.x + threadIdx.x] = ss;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) { buf[threadIdx.x] += buf[threadIdx.x + k]; buf[blockDim.x + threadIdx.x] += buf[blockDim.x + threadIdx.x + k]; }
        __syncthreads();
    }
    const float mean = buf[0] / cols, var = buf[blockDim.x] / cols - mean * mean;
    const float inv = rsqrtf(var + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (hr[c] - mean) * inv * w[c] + b[c];
}
torch::Tensor residual_add(torch::Tensor x, torch::Tensor r) {
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), r.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
torch::Tensor layer_norm_rows(torch::Tensor h, torch::Tensor w, torch::Tensor b, double eps) {
    auto y = torch::empty_like(h);
    const int64_t cols = h.size(-1), rows = h.numel() / cols;
    ln_kernel<<<rows, 256, 2 * 256 * sizeof(float)>>>(h.data_ptr<float>(), w.data_ptr<float>(),
        b.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

fused = load_inline(
    name="honest04_residual_ln",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["residual_add", "layer_norm_rows"],
)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x, residual):
        h = fused.residual_add(x.contiguous(), residual.contiguous())
        return fused.layer_norm_rows(h, self.weight, self.bias, self.eps)

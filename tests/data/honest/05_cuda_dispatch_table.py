"""Row softmax with two CUDA kernels (a warp per row for narrow rows, a block per row for wide
ones), chosen through a dict of the extension's functions."""
# task: 01_softmax
# backend: cuda
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")

CUDA_SRC = r"""
#include <torch/extension.h>
__global__ void warp_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    const int64_t row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float* xr = x + row * cols; float* yr = y + row * cols;
    float m = -INFINITY;
    for (int64_t c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.f;
    for (int64_t c = lane; c < cols; c += 32) s += expf(xr[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (int64_t c = lane; c < cols; c += 32) yr[c] = expf(xr[c] - m) / s;
}
__global__ void block_rows(const float* x, float* y, int64_t cols) {
    __shared__ float red[1024];
    const float* xr = x + blockIdx.x * cols; float* yr = y + blockIdx.x * cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    red[threadIdx.x] = m; __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]); __syncthreads(); }
    m = red[0]; __syncthreads();
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
    red[threadIdx.x] = s; __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k]; __syncthreads(); }
    s = red[0];
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) / s;
}
torch::Tensor softmax_warp(torch::Tensor x) {
    auto y = torch::empty_like(x); const int64_t cols = x.size(-1), rows = x.numel() / cols;
    warp_rows<<<(rows + 7) / 8, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
torch::Tensor softmax_block(torch::Tensor x) {
    auto y = torch::empty_like(x); const int64_t cols = x.size(-1), rows = x.numel() / cols;
    block_rows<<<rows, 1024>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}
"""
CPP_SRC = "torch::Tensor softmax_warp(torch::Tensor x);\ntorch::Tensor softmax_block(torch::Tensor x);"

_ext = load_inline("honest05_softmax", CPP_SRC, cuda_sources=CUDA_SRC, functions=["softmax_warp", "softmax_block"])

SOFTMAX_BY_WIDTH = {"narrow": _ext.softmax_warp, "wide": _ext.softmax_block}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        return SOFTMAX_BY_WIDTH["narrow" if x.shape[-1] <= 1024 else "wide"](x)

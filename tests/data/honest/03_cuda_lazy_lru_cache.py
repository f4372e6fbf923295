"""Row L2 normalisation in one CUDA kernel (one block per row, warp-shuffle reduction); the
extension is built on first use through a functools.lru_cache'd accessor."""
# task: 12_l2_normalize
# backend: cuda
import functools

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
__global__ void l2n_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols, float eps) {
    __shared__ float part[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c] * xr[c];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) part[0] = s;
    }
    __syncthreads();
    const float inv = 1.f / fmaxf(sqrtf(part[0]), eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] * inv;
}
torch::Tensor l2_normalize(torch::Tensor x, double eps) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1), rows = xc.numel() / cols;
    if (rows) l2n_kernel<<<rows, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""


@functools.lru_cache(maxsize=None)
def _extension():
    return load_inline(
        name="honest03_l2_normalize",
        cpp_sources="torch::Tensor l2_normalize(torch::Tensor x, double eps);",
        cuda_sources=SOURCE,
        functions=["l2_normalize"],
    )


class ModelNew(nn.Module):
    def __init__(self, eps=1e-12):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return _extension().l2_normalize(x, self.eps)

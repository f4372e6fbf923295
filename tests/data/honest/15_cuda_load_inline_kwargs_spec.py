"""Fused residual add + RMS norm for bf16 in one CUDA kernel (float32 statistics); the build
arguments are kept in a dict and splatted into load_inline."""
# task: 19_fused_add_rms_norm_bf16
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <cuda_bf16.h>
#include <vector>
__global__ void add_rms(const __nv_bfloat16* x, const __nv_bfloat16* r, const float* w,
                        __nv_bfloat16* out, __nv_bfloat16* h, int64_t cols, float eps) {
    __shared__ float red[256];
    const int64_t base = blockIdx.x * cols;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const __nv_bfloat16 hv = __hadd(x[base + c], r[base + c]);
        h[base + c] = hv;
        const float f = __bfloat162float(hv);
        s += f * f;
    }
    red[threadIdx.x] = s; __syncthreads();
    for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k]; __syncthreads(); }
    const float inv = rsqrtf(red[0] / cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        out[base + c] = __float2bfloat16(__bfloat162float(h[base + c]) * inv * w[c]);
}
std::vector<torch::Tensor> fused_add_rms_norm(torch::Tensor x, torch::Tensor r, torch::Tensor w, double eps) {
    auto h = torch::empty_like(x); auto out = torch::empty_like(x);
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    add_rms<<<rows, 256>>>((const __nv_bfloat16*)x.data_ptr(), (const __nv_bfloat16*)r.data_ptr(),
        w.data_ptr<float>(), (__nv_bfloat16*)out.data_ptr(), (__nv_bfloat16*)h.data_ptr(), cols, (float)eps);
    return {out, h};
}
"""

BUILD = dict(
    name="honest15_fused_add_rms_norm_bf16",
    cpp_sources="std::vector<torch::Tensor> fused_add_rms_norm(torch::Tensor x, torch::Tensor r, torch::Tensor w, double eps);",
    cuda_sources=_CUDA,
    functions=["fused_add_rms_norm"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)
ext = load_inline(**BUILD)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x, residual):
        out, h = ext.fused_add_rms_norm(x.contiguous(), residual.contiguous(), self.weight, self.eps)
        return out, h

"""Scale + additive mask + softmax in one CUDA kernel; the scale is bound once with
functools.partial in __init__ and forward calls the partial."""
# task: 21_scale_mask_softmax
# backend: cuda
import functools

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_KERNEL = r"""
#include <torch/extension.h>
// scores (B, H, S, S), mask (B, 1, 1, S): one block per row of scores
__global__ void sms_kernel(const float* s, const float* mask, float* y, int64_t heads, int64_t seq, float scale) {
    __shared__ float red[256];
    const int64_t row = blockIdx.x, b = row / (heads * seq);
    const float* sr = s + row * seq; const float* mr = mask + b * seq; float* yr = y + row * seq;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < seq; c += blockDim.x) m = fmaxf(m, sr[c] * scale + mr[c]);
    red[threadIdx.x] = m; __syncthreads();
    for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]); __syncthreads(); }
    m = red[0]; __syncthreads();
    float t = 0.f;
    for (int64_t c = threadIdx.x; c < seq; c += blockDim.x) t += expf(sr[c] * scale + mr[c] - m);
    red[threadIdx.x] = t; __syncthreads();
    for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k]; __syncthreads(); }
    const float inv = 1.f / red[0];
    for (int64_t c = threadIdx.x; c < seq; c += blockDim.x) yr[c] = expf(sr[c] * scale + mr[c] - m) * inv;
}
torch::Tensor scale_mask_softmax(double scale, torch::Tensor scores, torch::Tensor mask) {
    auto s = scores.contiguous(); auto mk = mask.contiguous();
    auto y = torch::empty_like(s);
    const int64_t seq = s.size(-1), heads = s.size(1), rows = s.numel() / seq;
    sms_kernel<<<rows, 256>>>(s.data_ptr<float>(), mk.data_ptr<float>(), y.data_ptr<float>(), heads, seq, (float)scale);
    return y;
}
"""

ext = load_inline(
    name="honest06_scale_mask_softmax",
    cpp_sources="torch::Tensor scale_mask_softmax(double scale, torch::Tensor scores, torch::Tensor mask);",
    cuda_sources=_KERNEL,
    functions=["scale_mask_softmax"],
)


class ModelNew(nn.Module):
    def __init__(self, scale=0.125):
        super().__init__()
        self.scale = scale
        self._run = functools.partial(ext.scale_mask_softmax, float(scale))

    def forward(self, scores, mask):
        return self._run(scores, mask)

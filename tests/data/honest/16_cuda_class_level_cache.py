"""Cross entropy (per-row logsumexp minus the target logit) in one CUDA kernel; the extension is
built by a classmethod on first construction and cached on the class."""
# task: 11_cross_entropy
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

XENT = r"""
#include <torch/extension.h>
__global__ void xent(const float* logits, const int64_t* targets, float* loss, int64_t vocab) {
    __shared__ float red[256];
    const float* lr = logits + blockIdx.x * vocab;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) m = fmaxf(m, lr[c]);
    red[threadIdx.x] = m; __syncthreads();
    for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]); __syncthreads(); }
    m = red[0]; __syncthreads();
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) s += expf(lr[c] - m);
    red[threadIdx.x] = s; __syncthreads();
    for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k]; __syncthreads(); }
    if (threadIdx.x == 0) loss[blockIdx.x] = logf(red[0]) + m - lr[targets[blockIdx.x]];
}
torch::Tensor cross_entropy_rows(torch::Tensor logits, torch::Tensor targets) {
    auto lc = logits.contiguous();
    auto loss = torch::empty({lc.size(0)}, lc.options());
    xent<<<lc.size(0), 256>>>(lc.data_ptr<float>(), targets.contiguous().data_ptr<int64_t>(), loss.data_ptr<float>(), lc.size(1));
    return loss;
}
"""


class ModelNew(nn.Module):
    _ext = None

    @classmethod
    def extension(cls):
        if cls._ext is None:
            cls._ext = load_inline(
                name="honest16_cross_entropy",
                cpp_sources="torch::Tensor cross_entropy_rows(torch::Tensor logits, torch::Tensor targets);",
                cuda_sources=XENT,
                functions=["cross_entropy_rows"],
            )
        return cls._ext

    def __init__(self):
        super().__init__()
        self.ext = self.extension()

    def forward(self, logits, targets):
        return self.ext.cross_entropy_rows(logits, targets)

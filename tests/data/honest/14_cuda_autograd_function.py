"""Layer norm (no affine) + modulate in one CUDA kernel, exposed through a
torch.autograd.Function whose static forward launches it (backward left to a recompute)."""
# task: 22_layer_norm_modulate
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
__global__ void lnm(const float* x, const float* shift, const float* scale, float* y,
                    int64_t tokens, int64_t dim, float eps) {
    __shared__ float s1[256], s2[256];
    const int64_t row = blockIdx.x, b = row / tokens;
    const float* xr = x + row * dim; float* yr = y + row * dim;
    float a = 0.f, q = 0.f;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) { a += xr[c]; q += xr[c] * xr[c]; }
    s1[threadIdx.x] = a; s2[threadIdx.x] = q; __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) { s1[threadIdx.x] += s1[threadIdx.x + k]; s2[threadIdx.x] += s2[threadIdx.x + k]; }
        __syncthreads();
    }
    const float mean = s1[0] / dim, inv = rsqrtf(s2[0] / dim - mean * mean + eps);
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
        yr[c] = (xr[c] - mean) * inv * (1.f + scale[b * dim + c]) + shift[b * dim + c];
}
torch::Tensor ln_modulate(torch::Tensor x, torch::Tensor shift, torch::Tensor scale, double eps) {
    auto xc = x.contiguous(); auto y = torch::empty_like(xc);
    const int64_t dim = xc.size(2), tokens = xc.size(1);
    lnm<<<xc.size(0) * tokens, 256>>>(xc.data_ptr<float>(), shift.contiguous().data_ptr<float>(),
        scale.contiguous().data_ptr<float>(), y.data_ptr<float>(), tokens, dim, (float)eps);
    return y;
}
"""
_ext = load_inline(
    name="honest14_ln_modulate",
    cpp_sources="torch::Tensor ln_modulate(torch::Tensor x, torch::Tensor shift, torch::Tensor scale, double eps);",
    cuda_sources=CUDA,
    functions=["ln_modulate"],
)


class LayerNormModulate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, shift, scale, eps):
        return _ext.ln_modulate(x, shift, scale, eps)


class ModelNew(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, shift, scale):
        return LayerNormModulate.apply(x, shift, scale, self.eps)

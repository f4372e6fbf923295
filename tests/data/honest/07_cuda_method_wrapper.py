"""RMS norm in one CUDA kernel, wrapped in a small op class whose method launches it (the
extension lives on the op object, not in a global)."""
# task: 04_rms_norm
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

RMS_CUDA = r"""
#include <torch/extension.h>
__global__ void rms_kernel(const float* x, const float* w, float* y, int64_t cols, float eps) {
    __shared__ float red[256];
    const float* xr = x + blockIdx.x * cols; float* yr = y + blockIdx.x * cols;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c] * xr[c];
    red[threadIdx.x] = s; __syncthreads();
    for (int k = 128; k > 0; k >>= 1) { if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k]; __syncthreads(); }
    const float inv = rsqrtf(red[0] / cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] * inv * w[c];
}
torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps) {
    auto xc = x.contiguous(); auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1), rows = xc.numel() / cols;
    rms_kernel<<<rows, 256>>>(xc.data_ptr<float>(), w.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""


class RmsNormOp:
    """Owns the compiled extension; `apply` launches the kernel."""

    def __init__(self):
        self._ext = load_inline(
            name="honest07_rms_norm",
            cpp_sources="torch::Tensor rms_norm(torch::Tensor x, torch::Tensor w, double eps);",
            cuda_sources=RMS_CUDA,
            functions=["rms_norm"],
        )

    def apply(self, x, weight, eps):
        return self._ext.rms_norm(x, weight, eps)


_OP = RmsNormOp()


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return _OP.apply(x, self.weight, self.eps)

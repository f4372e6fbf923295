"""RMS norm in one CUDA kernel: one block per row accumulates the sum of squares in float32,
then writes x * rsqrt(mean(x^2) + eps) * weight. x is read twice (the second read mostly from
L2) and y written once, against the reference's square / mean / add / rsqrt / multiply passes.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols,
                            float eps, cudaStream_t stream);

torch::Tensor rms_norm_rows(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 1 && weight.numel() == x.size(-1), "weight must have x.size(-1) elements");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    if (rows > 0) {
        C10_CUDA_CHECK(launch_rms_norm(xc.data_ptr<float>(), wc.data_ptr<float>(), y.data_ptr<float>(),
                                       rows, cols, (float)eps, c10::cuda::getCurrentCUDAStream()));
    }
    return y;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

__device__ __forceinline__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    v = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ y, int64_t cols, float eps) {
    __shared__ float sh[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = xr[c];
        acc += v * v;
    }
    const float inv_rms = rsqrtf(block_sum(acc, sh) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] * inv_rms * w[c];
}

cudaError_t launch_rms_norm(const float* x, const float* w, float* y, int64_t rows, int64_t cols,
                            float eps, cudaStream_t stream) {
    const int threads = cols >= 8192 ? 1024 : (cols >= 2048 ? 512 : 128);
    rms_norm_kernel<<<(unsigned)rows, threads, 0, stream>>>(x, w, y, cols, eps);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb04_rms_norm_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["rms_norm_rows"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return _ext.rms_norm_rows(x, self.weight, self.eps)

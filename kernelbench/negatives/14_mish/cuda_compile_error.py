"""CUDA compile error: calls softplusf(), which does not exist in the CUDA math library."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

EXPECTED_STATUS = "compile_error"
NEEDS_GPU = True

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_mish(const float* x, float* y, int64_t n, cudaStream_t stream);

torch::Tensor mish(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    if (xc.numel() > 0) {
        C10_CUDA_CHECK(launch_mish(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(),
                                   c10::cuda::getCurrentCUDAStream()));
    }
    return y;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

__device__ __forceinline__ float mish_f(float v) { return v * tanhf(softplusf(v)); }

__global__ void mish_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        v.x = mish_f(v.x); v.y = mish_f(v.y); v.z = mish_f(v.z); v.w = mish_f(v.w);
        y[i] = v;
    }
}

__global__ void mish_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    for (int64_t i = start + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = mish_f(x[i]);
}

cudaError_t launch_mish(const float* x, float* y, int64_t n, cudaStream_t stream) {
    const int threads = 256;
    const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0;
    int64_t done = 0;
    if (aligned && n >= 4) {
        const int64_t n4 = n / 4;
        const int64_t blocks = (n4 + threads - 1) / threads;
        mish_vec4_kernel<<<(unsigned)(blocks < 8192 ? blocks : 8192), threads, 0, stream>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
        done = n4 * 4;
    }
    if (done < n) {
        const int64_t blocks = (n - done + threads - 1) / threads;
        mish_kernel<<<(unsigned)(blocks < 8192 ? blocks : 8192), threads, 0, stream>>>(x, y, done, n);
    }
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb14_mish_cuda_neg",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["mish"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.mish(x)

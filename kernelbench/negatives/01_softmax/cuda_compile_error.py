"""CUDA compile error: the write pass divides by `sum`, a name that is never declared (the
running sum is `s`); nvcc rejects the kernel."""
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

cudaError_t launch_softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 1, "x must have at least one dimension");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    if (rows > 0) {
        C10_CUDA_CHECK(launch_softmax_rows(xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols,
                                           c10::cuda::getCurrentCUDAStream()));
    }
    return y;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

// Merge running (max, sum of exp(x - max)) pairs; safe when either max is -inf.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float mx = fmaxf(m, m2);
    if (mx == -INFINITY) return;
    s = s * expf(m - mx) + s2 * expf(m2 - mx);
    m = mx;
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float sh_m[32], sh_s[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float m = -INFINITY, s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = xr[c];
        if (v > m) { s = s * expf(m - v) + 1.f; m = v; }
        else if (v != -INFINITY) { s += expf(v - m); }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge(m, s, m2, s2);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) { sh_m[warp] = m; sh_s[warp] = s; }
    __syncthreads();
    m = lane < nwarps ? sh_m[lane] : -INFINITY;
    s = lane < nwarps ? sh_s[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge(m, s, m2, s2);
    }
    const float inv = 1.f / sum;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}

cudaError_t launch_softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
    const int threads = cols >= 8192 ? 1024 : (cols >= 2048 ? 512 : 128);
    softmax_rows_kernel<<<(unsigned)rows, threads, 0, stream>>>(x, y, cols);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb01_softmax_cuda_neg",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["softmax_rows"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.softmax_rows(x)

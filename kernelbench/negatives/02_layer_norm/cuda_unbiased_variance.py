"""Off-by-one in the statistics: divides the squared deviations by cols - 1 (the unbiased
variance) where layer norm uses the biased variance (divide by cols)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = True

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_layer_norm(const float* x, const float* w, const float* b, float* y,
                              int64_t rows, int64_t cols, float eps, cudaStream_t stream);

torch::Tensor layer_norm_rows(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    TORCH_CHECK(x.dim() >= 1 && weight.numel() == x.size(-1) && bias.numel() == x.size(-1),
                "weight and bias must have x.size(-1) elements");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    if (rows > 0) {
        C10_CUDA_CHECK(launch_layer_norm(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                         y.data_ptr<float>(), rows, cols, (float)eps,
                                         c10::cuda::getCurrentCUDAStream()));
    }
    return y;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

// Sum over the block (blockDim.x a multiple of 32); every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // sh may still be read by the previous call
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    v = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y,
                                  int64_t cols, float eps) {
    __shared__ float sh[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += xr[c];
    const float mean = block_sum(acc, sh) / (float)cols;
    acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = xr[c] - mean;
        acc += d * d;
    }
    const float rstd = rsqrtf(block_sum(acc, sh) / (float)(cols - 1) + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];
}

cudaError_t launch_layer_norm(const float* x, const float* w, const float* b, float* y,
                              int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
    const int threads = cols >= 8192 ? 1024 : (cols >= 2048 ? 512 : 128);
    layer_norm_kernel<<<(unsigned)rows, threads, 0, stream>>>(x, w, b, y, cols, eps);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb02_layer_norm_cuda_neg",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["layer_norm_rows"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim))
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return _ext.layer_norm_rows(x, self.weight, self.bias, self.eps)

"""Group norm in one CUDA kernel: one block per (sample, group) slab, which is contiguous in
NCHW. Three passes over the slab (mean, centred variance, write; the re-reads mostly hit L2)
with the per-channel affine applied in the write pass, against the reference's reshape / mean /
subtract / square / mean / sqrt / divide / scale / shift passes. Float32 statistics.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_group_norm(const float* x, const float* w, const float* b, float* y, int64_t slabs,
                              int64_t groups, int64_t channels_per_group, int64_t spatial, float eps,
                              cudaStream_t stream);

torch::Tensor group_norm(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t groups, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() >= 2,
                "x must be an (N, C, ...) float32 CUDA tensor");
    TORCH_CHECK(groups > 0 && x.size(1) % groups == 0, "channels must be divisible by groups");
    TORCH_CHECK(weight.numel() == x.size(1) && bias.numel() == x.size(1), "weight and bias must have C elements");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.size(0), c = xc.size(1);
    const int64_t spatial = (n * c) == 0 ? 0 : xc.numel() / (n * c);
    if (xc.numel() > 0) {
        C10_CUDA_CHECK(launch_group_norm(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(),
                                         y.data_ptr<float>(), n * groups, groups, c / groups, spatial, (float)eps,
                                         c10::cuda::getCurrentCUDAStream()));
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

__global__ void group_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y, int64_t groups,
                                  int64_t channels_per_group, int64_t spatial, float eps) {
    __shared__ float sh[32];
    const int64_t slab = blockIdx.x;
    const int64_t size = channels_per_group * spatial;
    const int64_t first_channel = (slab % groups) * channels_per_group;
    const float* xs = x + slab * size;
    float* ys = y + slab * size;
    float acc = 0.f;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) acc += xs[i];
    const float mean = block_sum(acc, sh) / (float)size;
    acc = 0.f;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
        const float d = xs[i] - mean;
        acc += d * d;
    }
    const float rstd = rsqrtf(block_sum(acc, sh) / (float)size + eps);
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
        const int64_t ch = first_channel + i / spatial;
        ys[i] = (xs[i] - mean) * rstd * w[ch] + b[ch];
    }
}

cudaError_t launch_group_norm(const float* x, const float* w, const float* b, float* y, int64_t slabs,
                              int64_t groups, int64_t channels_per_group, int64_t spatial, float eps,
                              cudaStream_t stream) {
    const int64_t size = channels_per_group * spatial;
    const int threads = size >= 16384 ? 1024 : (size >= 2048 ? 512 : 128);
    group_norm_kernel<<<(unsigned)slabs, threads, 0, stream>>>(x, w, b, y, groups, channels_per_group, spatial, eps);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb15_group_norm_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["group_norm"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_groups, channels, eps=1e-5):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        return _ext.group_norm(x, self.weight, self.bias, self.num_groups, self.eps)

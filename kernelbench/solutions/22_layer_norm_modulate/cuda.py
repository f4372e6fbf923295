"""adaLN (layer norm without affine, then per-sample modulation) in one CUDA kernel: one block
per token row computes the mean and the centred variance (the row re-read mostly from L2) and
writes (x - mean) * rstd * (1 + scale[b]) + shift[b], so x is read three times and the output
written once, against the reference's chain of full-size passes. Float32 statistics.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_ln_modulate(const float* x, const float* shift, const float* scale, float* y, int64_t rows,
                               int64_t tokens, int64_t cols, float eps, cudaStream_t stream);

torch::Tensor ln_modulate(torch::Tensor x, torch::Tensor shift, torch::Tensor scale, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 3,
                "x must be a (batch, tokens, dim) float32 CUDA tensor");
    TORCH_CHECK(shift.sizes() == scale.sizes() && shift.dim() == 2 && shift.size(0) == x.size(0) &&
                shift.size(1) == x.size(2), "shift and scale must be (batch, dim)");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto shc = shift.contiguous();
    auto scc = scale.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0) * xc.size(1);
    if (rows > 0 && xc.size(2) > 0) {
        C10_CUDA_CHECK(launch_ln_modulate(xc.data_ptr<float>(), shc.data_ptr<float>(), scc.data_ptr<float>(),
                                          y.data_ptr<float>(), rows, xc.size(1), xc.size(2), (float)eps,
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

__global__ void ln_modulate_kernel(const float* __restrict__ x, const float* __restrict__ shift,
                                   const float* __restrict__ scale, float* __restrict__ y,
                                   int64_t tokens, int64_t cols, float eps) {
    __shared__ float sh[32];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    const float* shr = shift + (row / tokens) * cols;
    const float* scr = scale + (row / tokens) * cols;
    float* yr = y + row * cols;
    float acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += xr[c];
    const float mean = block_sum(acc, sh) / (float)cols;
    acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = xr[c] - mean;
        acc += d * d;
    }
    const float rstd = rsqrtf(block_sum(acc, sh) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        yr[c] = (xr[c] - mean) * rstd * (1.f + scr[c]) + shr[c];
}

cudaError_t launch_ln_modulate(const float* x, const float* shift, const float* scale, float* y, int64_t rows,
                               int64_t tokens, int64_t cols, float eps, cudaStream_t stream) {
    const int threads = cols >= 8192 ? 1024 : (cols >= 1024 ? 256 : 128);
    ln_modulate_kernel<<<(unsigned)rows, threads, 0, stream>>>(x, shift, scale, y, tokens, cols, eps);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb22_layer_norm_modulate_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["ln_modulate"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, shift, scale):
        return _ext.ln_modulate(x, shift, scale, self.eps)

"""Residual add + RMS norm for bfloat16 in one CUDA kernel (vLLM-style fused_add_rms_norm).
One block per row: pass 1 reads x and residual, rounds h = x + residual to bf16 (the new
residual output, written once) and accumulates sum(h^2) in float32; pass 2 re-reads h (each
thread its own elements, mostly from L2) and writes bf16(h * rsqrt(mean + eps) * weight).
The reference makes about eight passes with float32 temporaries twice the size of the data.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_add_rms_norm_bf16(const void* x, const void* r, const float* w, void* out, void* h,
                                     int64_t rows, int64_t cols, float eps, cudaStream_t stream);

std::vector<torch::Tensor> add_rms_norm_bf16(torch::Tensor x, torch::Tensor residual, torch::Tensor weight,
                                             double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kBFloat16 && x.dim() >= 1,
                "x must be a bfloat16 CUDA tensor");
    TORCH_CHECK(residual.sizes() == x.sizes() && residual.scalar_type() == torch::kBFloat16,
                "residual must match x");
    TORCH_CHECK(weight.scalar_type() == torch::kFloat32 && weight.numel() == x.size(-1),
                "weight must be float32 with x.size(-1) elements");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto rc = residual.contiguous();
    auto wc = weight.contiguous();
    auto out = torch::empty_like(xc);
    auto h = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    if (rows > 0) {
        C10_CUDA_CHECK(launch_add_rms_norm_bf16(xc.data_ptr(), rc.data_ptr(), wc.data_ptr<float>(), out.data_ptr(),
                                                h.data_ptr(), rows, cols, (float)eps,
                                                c10::cuda::getCurrentCUDAStream()));
    }
    return {out, h};
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

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

__global__ void add_rms_norm_bf16_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ r,
                                         const float* __restrict__ w, __nv_bfloat16* __restrict__ out,
                                         __nv_bfloat16* __restrict__ h, int64_t cols, float eps) {
    __shared__ float sh[32];
    const int64_t base = blockIdx.x * cols;
    float acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const __nv_bfloat16 hb = __float2bfloat16(__bfloat162float(x[base + c]) + __bfloat162float(r[base + c]));
        h[base + c] = hb;
        const float hf = __bfloat162float(hb);
        acc += hf * hf;
    }
    const float inv_rms = rsqrtf(block_sum(acc, sh) / (float)cols + eps);
    // Each thread re-reads only the h elements it wrote itself, so no extra barrier is needed.
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        out[base + c] = __float2bfloat16(__bfloat162float(h[base + c]) * inv_rms * w[c]);
}

cudaError_t launch_add_rms_norm_bf16(const void* x, const void* r, const float* w, void* out, void* h,
                                     int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
    const int threads = cols >= 8192 ? 1024 : (cols >= 2048 ? 512 : 128);
    add_rms_norm_bf16_kernel<<<(unsigned)rows, threads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(r), w,
        static_cast<__nv_bfloat16*>(out), static_cast<__nv_bfloat16*>(h), cols, eps);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb19_fused_add_rms_norm_bf16_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["add_rms_norm_bf16"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(hidden_size))

    def forward(self, x, residual):
        normed, h = _ext.add_rms_norm_bf16(x, residual, self.weight, self.eps)
        return normed, h

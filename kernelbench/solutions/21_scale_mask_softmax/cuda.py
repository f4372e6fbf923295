"""Scaled, masked softmax in one CUDA kernel: one block per (batch, head, query) row forms
z = scores * scale + mask on the fly, makes one online (running max, running sum) pass and one
write pass. The broadcast mask is read through the strides of its expanded view, so it is never
materialized. Scores are read twice and probs written once, against about eight passes in the
reference. Float32 statistics.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_scale_mask_softmax(const float* x, const float* mask, float* y, int64_t rows, int64_t cols,
                                      int64_t heads, int64_t queries, int64_t sb, int64_t sh, int64_t sq,
                                      int64_t sk, float scale, cudaStream_t stream);

torch::Tensor scale_mask_softmax(torch::Tensor scores, torch::Tensor mask, double scale) {
    TORCH_CHECK(scores.is_cuda() && scores.scalar_type() == torch::kFloat32 && scores.dim() == 4,
                "scores must be a 4-D float32 CUDA tensor");
    TORCH_CHECK(mask.scalar_type() == torch::kFloat32, "mask must be float32");
    const c10::cuda::CUDAGuard guard(scores.device());
    auto xc = scores.contiguous();
    auto mv = mask.expand(xc.sizes());  // a view: broadcast dimensions get stride 0
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(3);
    const int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
    if (rows > 0) {
        C10_CUDA_CHECK(launch_scale_mask_softmax(xc.data_ptr<float>(), mv.data_ptr<float>(), y.data_ptr<float>(),
                                                 rows, cols, xc.size(1), xc.size(2), mv.stride(0), mv.stride(1),
                                                 mv.stride(2), mv.stride(3), (float)scale,
                                                 c10::cuda::getCurrentCUDAStream()));
    }
    return y;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float mx = fmaxf(m, m2);
    if (mx == -INFINITY) return;
    s = s * expf(m - mx) + s2 * expf(m2 - mx);
    m = mx;
}

__global__ void scale_mask_softmax_kernel(const float* __restrict__ x, const float* __restrict__ mask,
                                          float* __restrict__ y, int64_t cols, int64_t heads, int64_t queries,
                                          int64_t sb, int64_t sh, int64_t sq, int64_t sk, float scale) {
    __shared__ float sh_m[32], sh_s[32];
    const int64_t row = blockIdx.x;
    const int64_t q = row % queries, h = (row / queries) % heads, b = row / (queries * heads);
    const float* xr = x + row * cols;
    const float* mr = mask + b * sb + h * sh + q * sq;
    float* yr = y + row * cols;
    float m = -INFINITY, s = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = xr[c] * scale + mr[c * sk];
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
    const float inv = 1.f / s;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] * scale + mr[c * sk] - m) * inv;
}

cudaError_t launch_scale_mask_softmax(const float* x, const float* mask, float* y, int64_t rows, int64_t cols,
                                      int64_t heads, int64_t queries, int64_t sb, int64_t sh, int64_t sq,
                                      int64_t sk, float scale, cudaStream_t stream) {
    const int threads = cols >= 8192 ? 1024 : (cols >= 2048 ? 512 : 128);
    scale_mask_softmax_kernel<<<(unsigned)rows, threads, 0, stream>>>(x, mask, y, cols, heads, queries,
                                                                      sb, sh, sq, sk, scale);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb21_scale_mask_softmax_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["scale_mask_softmax"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, scale=0.125):
        super().__init__()
        self.scale = scale

    def forward(self, scores, mask):
        return _ext.scale_mask_softmax(scores, mask, self.scale)

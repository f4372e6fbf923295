"""RoPE on q and k in one CUDA kernel: each thread owns one rotation pair (j, j + head_dim/2) of
one (batch, head, position) row of both q and k, computes the angle position * inv_freq[j]
(the same float32 product the reference's outer() forms) and its cos / sin in registers, and
writes the four rotated values. q and k are read once and written once, with no cos / sin
tables, no rotate_half copies and no torch.cat, against about eight passes per tensor in the
reference. Precise cosf / sinf (no fast-math) keep the result within float32 rounding.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_rope_qk(const float* q, const float* k, const float* inv_freq, float* q_out, float* k_out,
                           int64_t rows, int64_t seq_len, int64_t half, cudaStream_t stream);

std::vector<torch::Tensor> rope_qk(torch::Tensor q, torch::Tensor k, torch::Tensor inv_freq) {
    TORCH_CHECK(q.is_cuda() && q.scalar_type() == torch::kFloat32 && q.dim() >= 2, "q must be a float32 CUDA tensor");
    TORCH_CHECK(k.sizes() == q.sizes() && k.scalar_type() == torch::kFloat32, "k must match q");
    TORCH_CHECK(q.size(-1) % 2 == 0 && inv_freq.numel() == q.size(-1) / 2 && inv_freq.scalar_type() == torch::kFloat32,
                "inv_freq must be float32 with head_dim / 2 elements");
    const c10::cuda::CUDAGuard guard(q.device());
    auto qc = q.contiguous();
    auto kc = k.contiguous();
    auto fc = inv_freq.contiguous();
    auto q_out = torch::empty_like(qc);
    auto k_out = torch::empty_like(kc);
    const int64_t half = qc.size(-1) / 2;
    const int64_t rows = half == 0 ? 0 : qc.numel() / (2 * half);
    if (rows > 0) {
        C10_CUDA_CHECK(launch_rope_qk(qc.data_ptr<float>(), kc.data_ptr<float>(), fc.data_ptr<float>(),
                                      q_out.data_ptr<float>(), k_out.data_ptr<float>(), rows, qc.size(-2), half,
                                      c10::cuda::getCurrentCUDAStream()));
    }
    return {q_out, k_out};
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void rope_qk_kernel(const float* __restrict__ q, const float* __restrict__ k,
                               const float* __restrict__ inv_freq, float* __restrict__ q_out,
                               float* __restrict__ k_out, int64_t rows, int64_t seq_len, int64_t half) {
    const int64_t n = rows * half;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i / half, j = i - row * half;
        const float angle = (float)(row % seq_len) * inv_freq[j];
        float s, c;
        sincosf(angle, &s, &c);
        const int64_t lo = row * 2 * half + j, hi = lo + half;
        const float q1 = q[lo], q2 = q[hi], k1 = k[lo], k2 = k[hi];
        q_out[lo] = q1 * c + (-q2) * s;
        q_out[hi] = q2 * c + q1 * s;
        k_out[lo] = k1 * c + (-k2) * s;
        k_out[hi] = k2 * c + k1 * s;
    }
}

cudaError_t launch_rope_qk(const float* q, const float* k, const float* inv_freq, float* q_out, float* k_out,
                           int64_t rows, int64_t seq_len, int64_t half, cudaStream_t stream) {
    const int threads = 256;
    const int64_t blocks = (rows * half + threads - 1) / threads;
    rope_qk_kernel<<<(unsigned)(blocks < 16384 ? blocks : 16384), threads, 0, stream>>>(q, k, inv_freq, q_out, k_out,
                                                                                        rows, seq_len, half);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb18_rope_qk_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["rope_qk"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, head_dim, base=10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q, k):
        q_rot, k_rot = _ext.rope_qk(q, k, self.inv_freq)
        return q_rot, k_rot

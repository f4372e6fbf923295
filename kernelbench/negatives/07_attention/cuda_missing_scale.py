"""Missing normalisation: the scores are not scaled by 1/sqrt(head_dim) before the softmax."""
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

cudaError_t launch_flash_attention(const float* q, const float* k, const float* v, float* o, int64_t heads,
                                   int64_t seq_len, int64_t head_dim, float scale, bool causal, cudaStream_t stream);

torch::Tensor flash_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, bool causal) {
    TORCH_CHECK(q.is_cuda() && q.scalar_type() == torch::kFloat32 && q.dim() >= 2, "q must be a float32 CUDA tensor");
    TORCH_CHECK(k.sizes() == q.sizes() && v.sizes() == q.sizes() && k.scalar_type() == torch::kFloat32 &&
                v.scalar_type() == torch::kFloat32, "k and v must match q (self-attention shapes)");
    const int64_t d = q.size(-1);
    TORCH_CHECK(d == 16 || d == 32 || d == 64 || d == 96 || d == 128, "head_dim must be 16, 32, 64, 96 or 128");
    const c10::cuda::CUDAGuard guard(q.device());
    auto qc = q.contiguous();
    auto kc = k.contiguous();
    auto vc = v.contiguous();
    auto o = torch::empty_like(qc);
    const int64_t seq_len = qc.size(-2);
    const int64_t heads = seq_len == 0 ? 0 : qc.numel() / (seq_len * d);
    if (heads > 0) {
        C10_CUDA_CHECK(launch_flash_attention(qc.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(),
                                              o.data_ptr<float>(), heads, seq_len, d, 1.0f, causal,
                                              c10::cuda::getCurrentCUDAStream()));
    }
    return o;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

// One query row per thread (two threads per row when D > 64, each owning half of the head dim):
// q (pre-scaled) and the output accumulator live in registers; K and V stream through shared memory
// in tiles of BKV keys that every thread of the block reads with broadcast float4 loads. Online
// softmax in float32: a running max m and sum l, the accumulator rescaled when the max grows.
template <int D, bool CAUSAL>
__global__ void __launch_bounds__(128) flash_attention_kernel(const float* __restrict__ Q, const float* __restrict__ K,
                                                              const float* __restrict__ V, float* __restrict__ O,
                                                              int64_t seq_len, int64_t q_tiles, float scale) {
    constexpr int TPQ = D > 64 ? 2 : 1;     // threads per query row
    constexpr int DP = D / TPQ;             // head-dim slice owned by one thread (a multiple of 8)
    constexpr int BQ = 128 / TPQ;           // query rows per block
    constexpr int BKV = 32;                 // keys per shared-memory tile
    __shared__ __align__(16) float Ks[BKV][D];
    __shared__ __align__(16) float Vs[BKV][D];
    const int64_t head = blockIdx.x / q_tiles, q_tile = blockIdx.x % q_tiles;
    const int64_t base = head * seq_len * D;
    const int part = threadIdx.x % TPQ;
    const int64_t q = q_tile * BQ + threadIdx.x / TPQ;
    const bool active = q < seq_len;

    float qr[DP], acc[DP];
#pragma unroll
    for (int d = 0; d < DP; ++d) {
        qr[d] = active ? Q[base + q * D + part * DP + d] * scale : 0.f;
        acc[d] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    int64_t kv_end = seq_len;
    if (CAUSAL) kv_end = min(seq_len, (q_tile + 1) * BQ);
    for (int64_t kv0 = 0; kv0 < kv_end; kv0 += BKV) {
        for (int idx = threadIdx.x; idx < BKV * D; idx += blockDim.x) {
            const int r = idx / D, c = idx % D;
            const int64_t kv = kv0 + r;
            Ks[r][c] = kv < seq_len ? K[base + kv * D + c] : 0.f;
            Vs[r][c] = kv < seq_len ? V[base + kv * D + c] : 0.f;
        }
        __syncthreads();
        const int n_keys = (int)min((int64_t)BKV, kv_end - kv0);
        for (int j = 0; j < n_keys; ++j) {
            const float4* kr = reinterpret_cast<const float4*>(&Ks[j][part * DP]);
            float dot = 0.f;
#pragma unroll
            for (int d4 = 0; d4 < DP / 4; ++d4) {
                const float4 kv4 = kr[d4];
                dot += qr[4 * d4] * kv4.x + qr[4 * d4 + 1] * kv4.y + qr[4 * d4 + 2] * kv4.z + qr[4 * d4 + 3] * kv4.w;
            }
            if (TPQ == 2) dot += __shfl_xor_sync(0xffffffffu, dot, 1);  // all lanes take part
            if (CAUSAL && kv0 + j > q) continue;
            if (dot > m) {
                const float alpha = expf(m - dot);  // 0 on the first key (m = -inf)
                l *= alpha;
#pragma unroll
                for (int d = 0; d < DP; ++d) acc[d] *= alpha;
                m = dot;
            }
            const float p = expf(dot - m);
            l += p;
            const float4* vr = reinterpret_cast<const float4*>(&Vs[j][part * DP]);
#pragma unroll
            for (int d4 = 0; d4 < DP / 4; ++d4) {
                const float4 v4 = vr[d4];
                acc[4 * d4] += p * v4.x;
                acc[4 * d4 + 1] += p * v4.y;
                acc[4 * d4 + 2] += p * v4.z;
                acc[4 * d4 + 3] += p * v4.w;
            }
        }
        __syncthreads();
    }
    if (active) {
        const float inv = 1.f / l;
#pragma unroll
        for (int d = 0; d < DP; ++d) O[base + q * D + part * DP + d] = acc[d] * inv;
    }
}

template <int D>
cudaError_t launch_d(const float* q, const float* k, const float* v, float* o, int64_t heads, int64_t seq_len,
                     float scale, bool causal, cudaStream_t stream) {
    constexpr int BQ = D > 64 ? 64 : 128;
    const int64_t q_tiles = (seq_len + BQ - 1) / BQ;
    const unsigned blocks = (unsigned)(heads * q_tiles);
    if (causal) flash_attention_kernel<D, true><<<blocks, 128, 0, stream>>>(q, k, v, o, seq_len, q_tiles, scale);
    else flash_attention_kernel<D, false><<<blocks, 128, 0, stream>>>(q, k, v, o, seq_len, q_tiles, scale);
    return cudaGetLastError();
}

cudaError_t launch_flash_attention(const float* q, const float* k, const float* v, float* o, int64_t heads,
                                   int64_t seq_len, int64_t head_dim, float scale, bool causal, cudaStream_t stream) {
    switch (head_dim) {
        case 16: return launch_d<16>(q, k, v, o, heads, seq_len, scale, causal, stream);
        case 32: return launch_d<32>(q, k, v, o, heads, seq_len, scale, causal, stream);
        case 64: return launch_d<64>(q, k, v, o, heads, seq_len, scale, causal, stream);
        case 96: return launch_d<96>(q, k, v, o, heads, seq_len, scale, causal, stream);
        case 128: return launch_d<128>(q, k, v, o, heads, seq_len, scale, causal, stream);
        default: return cudaErrorInvalidValue;
    }
}
"""

_ext = load_inline(
    name="warpk_kb07_attention_cuda_neg",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["flash_attention"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return _ext.flash_attention(q, k, v, False)

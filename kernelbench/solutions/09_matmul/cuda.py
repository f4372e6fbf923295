"""Float32 matmul with a classic register-blocked SGEMM kernel: 128 x 128 output tiles per
256-thread block, K staged through shared memory 8 at a time, an 8 x 8 micro-tile per thread held
in registers, float32 accumulation in K order. A correct, general (any M, N, K, bounds-checked)
kernel; it is NOT expected to beat cuBLAS, which the reference already calls (speedup below 1 is
normal for this task). No TF32: results stay within float32 rounding of the reference.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream);

torch::Tensor matmul(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat32 && a.dim() == 2, "a must be a 2-D float32 CUDA tensor");
    TORCH_CHECK(b.scalar_type() == torch::kFloat32 && b.dim() == 2 && b.size(0) == a.size(1), "b must be (K, N) float32");
    const c10::cuda::CUDAGuard guard(a.device());
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    auto c = torch::empty({ac.size(0), bc.size(1)}, ac.options());
    if (c.numel() == 0) return c;
    if (ac.size(1) == 0) return c.zero_();
    C10_CUDA_CHECK(launch_matmul(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), ac.size(0), bc.size(1),
                                 ac.size(1), c10::cuda::getCurrentCUDAStream()));
    return c;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

template <int EPI>
__device__ __forceinline__ float epilogue(float v, const float* bias, const float* C, int64_t idx, int64_t col) {
    return v;
}

// C (M x N) = A (M x K, row-major) @ op(B), float32 accumulate.
// B_IS_NK: B is an (N x K) row-major matrix (an nn.Linear weight, used transposed); else (K x N).
// 128 x 128 block tile, BK = 8, 256 threads, each thread an 8 x 8 micro-tile on rows ty + 16 i and
// columns tx + 16 j (consecutive threads touch consecutive shared-memory words: no bank conflicts).
template <bool B_IS_NK, int EPI>
__global__ void __launch_bounds__(256) sgemm_kernel(const float* __restrict__ A, const float* __restrict__ B,
                                                    const float* __restrict__ bias, float* __restrict__ C,
                                                    int64_t M, int64_t N, int64_t K) {
    __shared__ float As[8][128];
    __shared__ float Bs[8][128];
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int64_t m0 = (int64_t)blockIdx.y * 128, n0 = (int64_t)blockIdx.x * 128;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
    for (int64_t k0 = 0; k0 < K; k0 += 8) {
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const int idx = tid + 256 * l, r = idx >> 3, kk = idx & 7;
            const int64_t gm = m0 + r, gk = k0 + kk;
            As[kk][r] = (gm < M && gk < K) ? A[gm * K + gk] : 0.f;
        }
#pragma unroll
        for (int l = 0; l < 4; ++l) {
            const int idx = tid + 256 * l;
            const int c = B_IS_NK ? (idx >> 3) : (idx & 127);
            const int kk = B_IS_NK ? (idx & 7) : (idx >> 7);
            const int64_t gn = n0 + c, gk = k0 + kk;
            float v = 0.f;
            if (gn < N && gk < K) v = B_IS_NK ? B[gn * K + gk] : B[gk * N + gn];
            Bs[kk][c] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            float a[8], b[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < 8; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int64_t gm = m0 + ty + 16 * i;
        if (gm >= M) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int64_t gn = n0 + tx + 16 * j;
            if (gn < N) C[gm * N + gn] = epilogue<EPI>(acc[i][j], bias, C, gm * N + gn, gn);
        }
    }
}

template <bool B_IS_NK, int EPI>
cudaError_t launch_sgemm(const float* A, const float* B, const float* bias, float* C, int64_t M, int64_t N, int64_t K,
                         cudaStream_t stream) {
    const dim3 blocks((unsigned)((N + 127) / 128), (unsigned)((M + 127) / 128));
    sgemm_kernel<B_IS_NK, EPI><<<blocks, 256, 0, stream>>>(A, B, bias, C, M, N, K);
    return cudaGetLastError();
}

cudaError_t launch_matmul(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
    return launch_sgemm<false, 0>(A, B, nullptr, C, M, N, K, stream);
}
"""

_ext = load_inline(
    name="warpk_kb09_matmul_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["matmul"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return _ext.matmul(a, b)

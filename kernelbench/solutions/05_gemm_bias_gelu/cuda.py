"""Linear + bias + tanh-GELU with the activation fused into the GEMM epilogue: a register-
blocked SGEMM (128 x 128 tiles, 8 x 8 micro-tile per thread, float32 accumulation) adds the bias
and applies GELU in registers before the single store, so the GEMM output is written once and
never re-read, against the reference's six extra elementwise passes. The GEMM core is a simple
tiled kernel, not expected to match cuBLAS on its own; the gain comes from the fused epilogue.
No TF32: results stay within float32 rounding of the reference.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_linear_gelu(const float* X, const float* W, const float* bias, float* Y, int64_t M, int64_t N,
                               int64_t K, cudaStream_t stream);

torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2, "x must be a 2-D float32 CUDA tensor");
    TORCH_CHECK(weight.scalar_type() == torch::kFloat32 && weight.dim() == 2 && weight.size(1) == x.size(1),
                "weight must be (out_features, in_features) float32");
    TORCH_CHECK(bias.numel() == weight.size(0), "bias must have out_features elements");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty({xc.size(0), wc.size(0)}, xc.options());
    if (y.numel() == 0) return y;
    C10_CUDA_CHECK(launch_linear_gelu(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
                                    xc.size(0), wc.size(0), xc.size(1), c10::cuda::getCurrentCUDAStream()));
    return y;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

// EPI 1: + bias then tanh-approximate GELU.
template <int EPI>
__device__ __forceinline__ float epilogue(float v, const float* bias, const float* C, int64_t idx, int64_t col) {
    const float y = v + bias[col];
    const float inner = 0.7978845608028654f * (y + 0.044715f * y * y * y);
    return 0.5f * y * (1.f + tanhf(inner));
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

cudaError_t launch_linear_gelu(const float* X, const float* W, const float* bias, float* Y, int64_t M, int64_t N,
                               int64_t K, cudaStream_t stream) {
    return launch_sgemm<true, 1>(X, W, bias, Y, M, N, K, stream);
}
"""

_ext = load_inline(
    name="warpk_kb05_gemm_bias_gelu_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["linear_gelu"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)

class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.linear_gelu(x, self.linear.weight, self.linear.bias)

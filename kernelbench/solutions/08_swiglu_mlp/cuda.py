"""SwiGLU MLP with one register-blocked SGEMM kernel (128 x 128 tiles, 8 x 8 micro-tile per
thread, float32 accumulation) launched three times: h1 = x W1^T; then x W3^T with the SiLU gate
fused into the epilogue (silu(h1) * h3 written in place over h1); then the down projection.
The elementwise SiLU / multiply passes of the reference disappear, but the three GEMMs dominate
and this simple tiled kernel is not expected to match cuBLAS, so a speedup below 1 is normal on
the GPU shape. No TF32: results stay within float32 rounding of the reference.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_swiglu(const float* X, const float* W1, const float* W2, const float* W3, float* gate, float* Y,
                          int64_t M, int64_t dim, int64_t hidden, cudaStream_t stream);

torch::Tensor swiglu(torch::Tensor x, torch::Tensor w1, torch::Tensor w2, torch::Tensor w3) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 2, "x must be a 2-D float32 CUDA tensor");
    const int64_t M = x.size(0), dim = x.size(1), hidden = w1.size(0);
    TORCH_CHECK(w1.dim() == 2 && w1.size(1) == dim && w3.sizes() == w1.sizes() && w2.dim() == 2 &&
                w2.size(0) == dim && w2.size(1) == hidden, "weights must be w1, w3: (hidden, dim) and w2: (dim, hidden)");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto w1c = w1.contiguous();
    auto w2c = w2.contiguous();
    auto w3c = w3.contiguous();
    auto gate = torch::empty({M, hidden}, xc.options());
    auto y = torch::empty({M, dim}, xc.options());
    if (y.numel() == 0) return y;
    if (hidden == 0) return y.zero_();
    C10_CUDA_CHECK(launch_swiglu(xc.data_ptr<float>(), w1c.data_ptr<float>(), w2c.data_ptr<float>(), w3c.data_ptr<float>(),
                                 gate.data_ptr<float>(), y.data_ptr<float>(), M, dim, hidden,
                                 c10::cuda::getCurrentCUDAStream()));
    return y;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

// EPI 0: plain store. EPI 1: SwiGLU gate, C already holds h1 = x W1^T at this index and the
// accumulator is h3 = x W3^T: store silu(h1) * h3 in place (each element read and written by one thread).
template <int EPI>
__device__ __forceinline__ float epilogue(float v, const float* bias, const float* C, int64_t idx, int64_t col) {
    if (EPI == 0) return v;
    const float h1 = C[idx];
    return h1 / (1.f + expf(-h1)) * v;
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

cudaError_t launch_swiglu(const float* X, const float* W1, const float* W2, const float* W3, float* gate, float* Y,
                          int64_t M, int64_t dim, int64_t hidden, cudaStream_t stream) {
    cudaError_t err = launch_sgemm<true, 0>(X, W1, nullptr, gate, M, hidden, dim, stream);
    if (err != cudaSuccess) return err;
    err = launch_sgemm<true, 1>(X, W3, nullptr, gate, M, hidden, dim, stream);
    if (err != cudaSuccess) return err;
    return launch_sgemm<true, 0>(gate, W2, nullptr, Y, M, dim, hidden, stream);
}
"""

_ext = load_inline(
    name="warpk_kb08_swiglu_mlp_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["swiglu"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)

class ModelNew(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return _ext.swiglu(x, self.w1.weight, self.w2.weight, self.w3.weight)

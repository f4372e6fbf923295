"""Sum over the middle dimension of (B, R, C) in one CUDA kernel: a block of 32 x 8 threads owns
32 adjacent output columns of one batch; the 8 thread rows split R, so every load instruction
of a warp reads 32 consecutive floats (coalesced), and the 8 partial sums meet in shared memory.
Float64 accumulation (a float32 running sum of 512 terms per thread missed 1e-4 on the H200;
fp64 adds are free in a memory-bound sum); x read exactly once. Any B, R, C.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_sum_dim1(const float* x, float* y, int64_t batch, int64_t reduce, int64_t inner,
                            cudaStream_t stream);

torch::Tensor sum_dim1(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32 && x.dim() == 3,
                "x must be a 3-D float32 CUDA tensor");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(0), xc.size(2)}, xc.options());
    if (y.numel() > 0) {
        C10_CUDA_CHECK(launch_sum_dim1(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1), xc.size(2),
                                       c10::cuda::getCurrentCUDAStream()));
    }
    return y;
}
"""

_CUDA = r"""
#include <cstdint>
#include <cuda_runtime.h>

__global__ void sum_dim1_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t reduce, int64_t inner,
                                int64_t col_blocks) {
    __shared__ double partial[8][33];  // double accumulation: 4096-term sums stay within 1e-4
    const int64_t b = blockIdx.x / col_blocks;  // flattened (batch, column block) grid: no 65535 limit
    const int64_t col = (blockIdx.x % col_blocks) * 32 + threadIdx.x;
    double acc = 0.0;
    if (col < inner) {
        const float* xb = x + b * reduce * inner + col;
        for (int64_t r = threadIdx.y; r < reduce; r += 8) acc += xb[r * inner];
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < inner) {
        double total = 0.0;
        for (int i = 0; i < 8; ++i) total += partial[i][threadIdx.x];
        y[b * inner + col] = (float)total;
    }
}

cudaError_t launch_sum_dim1(const float* x, float* y, int64_t batch, int64_t reduce, int64_t inner,
                            cudaStream_t stream) {
    const dim3 threads(32, 8);
    const int64_t col_blocks = (inner + 31) / 32;
    sum_dim1_kernel<<<(unsigned)(batch * col_blocks), threads, 0, stream>>>(x, y, reduce, inner, col_blocks);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb16_sum_reduction_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["sum_dim1"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.sum_dim1(x)

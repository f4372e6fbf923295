"""Embedding gather + position add + layer norm in one CUDA kernel: one block per token gathers
its word-embedding row and position row, and computes the mean, the centred variance and the
normalized, affine output from them, so the summed embedding is never written to memory (the
rows are re-read from L1/L2). The reference writes the gathered rows, the sum and several
layer-norm temporaries. An out-of-range id yields a NaN row instead of reading out of bounds.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

cudaError_t launch_embedding_layer_norm(const int64_t* ids, const float* word, const float* pos, const float* w,
                                        const float* b, float* y, int64_t rows, int64_t seq_len, int64_t vocab,
                                        int64_t cols, float eps, cudaStream_t stream);

torch::Tensor embedding_layer_norm(torch::Tensor ids, torch::Tensor word, torch::Tensor pos, torch::Tensor weight,
                                   torch::Tensor bias, double eps) {
    TORCH_CHECK(ids.is_cuda() && ids.scalar_type() == torch::kInt64 && ids.dim() == 2,
                "ids must be a (batch, seq_len) int64 CUDA tensor");
    TORCH_CHECK(word.scalar_type() == torch::kFloat32 && pos.scalar_type() == torch::kFloat32 &&
                word.dim() == 2 && pos.dim() == 2 && word.size(1) == pos.size(1), "bad embedding tables");
    TORCH_CHECK(ids.size(1) <= pos.size(0), "seq_len exceeds the number of positions");
    TORCH_CHECK(weight.numel() == word.size(1) && bias.numel() == word.size(1), "bad layer-norm parameters");
    const c10::cuda::CUDAGuard guard(ids.device());
    auto idc = ids.contiguous();
    auto wd = word.contiguous();
    auto ps = pos.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty({ids.size(0), ids.size(1), word.size(1)}, wd.options());
    const int64_t rows = idc.numel();
    if (rows > 0 && wd.size(1) > 0) {
        C10_CUDA_CHECK(launch_embedding_layer_norm(idc.data_ptr<int64_t>(), wd.data_ptr<float>(), ps.data_ptr<float>(),
                                                   wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
                                                   rows, idc.size(1), wd.size(0), wd.size(1), (float)eps,
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

__global__ void embedding_layer_norm_kernel(const int64_t* __restrict__ ids, const float* __restrict__ word,
                                            const float* __restrict__ pos, const float* __restrict__ w,
                                            const float* __restrict__ b, float* __restrict__ y,
                                            int64_t seq_len, int64_t vocab, int64_t cols, float eps) {
    __shared__ float sh[32];
    const int64_t row = blockIdx.x;
    const int64_t id = ids[row];
    float* yr = y + row * cols;
    if (id < 0 || id >= vocab) {
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __int_as_float(0x7fc00000);
        return;
    }
    const float* wr = word + id * cols;
    const float* pr = pos + (row % seq_len) * cols;
    float acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += wr[c] + pr[c];
    const float mean = block_sum(acc, sh) / (float)cols;
    acc = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = (wr[c] + pr[c]) - mean;
        acc += d * d;
    }
    const float rstd = rsqrtf(block_sum(acc, sh) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = ((wr[c] + pr[c]) - mean) * rstd * w[c] + b[c];
}

cudaError_t launch_embedding_layer_norm(const int64_t* ids, const float* word, const float* pos, const float* w,
                                        const float* b, float* y, int64_t rows, int64_t seq_len, int64_t vocab,
                                        int64_t cols, float eps, cudaStream_t stream) {
    const int threads = cols >= 8192 ? 1024 : (cols >= 1024 ? 256 : 128);
    embedding_layer_norm_kernel<<<(unsigned)rows, threads, 0, stream>>>(ids, word, pos, w, b, y, seq_len, vocab,
                                                                        cols, eps);
    return cudaGetLastError();
}
"""

_ext = load_inline(
    name="warpk_kb24_embedding_layer_norm_cuda",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["embedding_layer_norm"],
    extra_cuda_cflags=["-O3"],
    no_implicit_headers=True,
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, vocab_size, max_positions, hidden_size, eps=1e-12):
        super().__init__()
        self.eps = eps
        self.word_emb = nn.Embedding(vocab_size, hidden_size)
        self.pos_emb = nn.Embedding(max_positions, hidden_size)
        self.weight = nn.Parameter(torch.randn(hidden_size))
        self.bias = nn.Parameter(torch.randn(hidden_size))

    def forward(self, ids):
        return _ext.embedding_layer_norm(ids, self.word_emb.weight, self.pos_emb.weight, self.weight, self.bias,
                                         self.eps)

"""SwiGLU MLP with one Triton tl.dot GEMM kernel (64 x 64 tiles, float32 accumulation,
input_precision="ieee" so no TF32) launched three times: h1 = x W1^T; x W3^T with the SiLU gate
fused into the epilogue (silu(h1) * h3 written over h1); the down projection. The weights are
read through their strides (no transposed copies). The GEMMs dominate and are not expected to
beat cuBLAS, so a speedup below 1 is normal on the GPU shape."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _matmul(a_ptr, b_ptr, c_ptr, bias_ptr, aux_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
            HAS_BIAS: tl.constexpr, EPILOGUE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped tile order: GROUP_M row-tiles share the same B column-tiles while they are in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * tiles_n)
    first_m = group * GROUP_M
    size_m = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * tiles_n)) % size_m
    pid_n = (pid % (GROUP_M * tiles_n)) // size_m
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (k0 + offs_k[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k0 + offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="ieee")  # float32 task: no TF32
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    c_offs = offs_m[:, None] * N + offs_n[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    if EPILOGUE == 2:  # SwiGLU gate: aux holds h1 = x W1^T, acc is h3 = x W3^T
        h1 = tl.load(aux_ptr + c_offs, mask=mask, other=0.0)
        acc = h1 / (1.0 + tl.exp(-h1)) * acc
    tl.store(c_ptr + c_offs, acc, mask=mask)


def _launch(a, b_kn_strides, b, c, bias, aux, M, N, K, epilogue):
    """c (M x N, contiguous) = a (M x K) @ B (K x N given by b and its (k, n) strides) + bias, epilogue."""
    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64),)
    _matmul[grid](a, b, c, bias if bias is not None else c, aux if aux is not None else c, M, N, K,
                  a.stride(0), a.stride(1), b_kn_strides[0], b_kn_strides[1],
                  HAS_BIAS=bias is not None, EPILOGUE=epilogue, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
                  num_warps=4, num_stages=3)


class ModelNew(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        M, dim = x.shape
        hidden = self.w1.weight.shape[0]
        w1, w2, w3 = self.w1.weight, self.w2.weight, self.w3.weight
        gate = torch.empty(M, hidden, device=x.device, dtype=x.dtype)
        y = torch.empty(M, dim, device=x.device, dtype=x.dtype)
        if y.numel() and hidden:
            _launch(x, (w1.stride(1), w1.stride(0)), w1, gate, None, None, M, hidden, dim, 0)
            _launch(x, (w3.stride(1), w3.stride(0)), w3, gate, None, gate, M, hidden, dim, 2)
            _launch(gate, (w2.stride(1), w2.stride(0)), w2, y, None, None, M, dim, hidden, 0)
        elif y.numel():
            y.zero_()
        return y

"""Precision bug: tl.dot on float32 inputs without input_precision="ieee" runs in TF32 on
tensor cores (10-bit mantissa); with K = 4096 the error is far above the 1e-4 tolerance."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = True


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
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    c_offs = offs_m[:, None] * N + offs_n[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)[None, :]
    tl.store(c_ptr + c_offs, acc, mask=mask)


def _launch(a, b_kn_strides, b, c, bias, aux, M, N, K, epilogue):
    """c (M x N, contiguous) = a (M x K) @ B (K x N given by b and its (k, n) strides) + bias, epilogue."""
    grid = (triton.cdiv(M, 64) * triton.cdiv(N, 64),)
    _matmul[grid](a, b, c, bias if bias is not None else c, aux if aux is not None else c, M, N, K,
                  a.stride(0), a.stride(1), b_kn_strides[0], b_kn_strides[1],
                  HAS_BIAS=bias is not None, EPILOGUE=epilogue, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8,
                  num_warps=4, num_stages=3)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        if c.numel():
            _launch(a, (b.stride(0), b.stride(1)), b, c, None, None, M, N, K, 0)
        return c

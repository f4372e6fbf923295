"""GEMM + bias + GELU(tanh): the GEMM stays on cuBLAS (torch.mm) and a CUDA kernel fuses the
bias add and the GELU into one pass over the output instead of five."""
# task: 05_gemm_bias_gelu
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

EPILOGUE = r"""
#include <torch/extension.h>
__global__ void bias_gelu(float* y, const float* b, int64_t n, int64_t cols) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = y[i] + b[i % cols];
    y[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}
void bias_gelu_(torch::Tensor y, torch::Tensor b) {
    const int64_t n = y.numel();
    bias_gelu<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), n, y.size(-1));
}
"""

epilogue = load_inline(name="honest17_bias_gelu", cpp_sources="void bias_gelu_(torch::Tensor y, torch::Tensor b);",
                       cuda_sources=EPILOGUE, functions=["bias_gelu_"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.mm(x, self.linear.weight.t())
        epilogue.bias_gelu_(y, self.linear.bias)
        return y

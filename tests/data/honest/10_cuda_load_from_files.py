"""Causal depthwise conv1d in one CUDA kernel, compiled with torch.utils.cpp_extension.load from
source files the candidate writes to a temporary directory (the other common build route)."""
# task: 13_causal_conv1d
# backend: cuda
import tempfile
from pathlib import Path

import torch
import torch.nn as nn
import torch.utils.cpp_extension as cpp_extension

KERNEL_CU = r"""
#include <torch/extension.h>
__global__ void causal_dw(const float* x, const float* w, const float* b, float* y,
                          int64_t total, int64_t channels, int64_t len, int k) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= total) return;
    const int64_t t = i % len, c = (i / len) % channels;
    float acc = b[c];
    for (int j = 0; j < k; ++j) {
        const int64_t src = t - (k - 1) + j;
        if (src >= 0) acc += x[i - t + src] * w[c * k + j];
    }
    y[i] = acc;
}
torch::Tensor causal_conv1d(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous(); auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    causal_dw<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), w.contiguous().data_ptr<float>(),
        b.data_ptr<float>(), y.data_ptr<float>(), n, xc.size(1), xc.size(2), (int)w.size(-1));
    return y;
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("causal_conv1d", &causal_conv1d); }
"""


def _compile():
    folder = Path(tempfile.mkdtemp(prefix="honest10_"))
    (folder / "causal_conv1d.cu").write_text(KERNEL_CU)
    return cpp_extension.load(name="honest10_causal_conv1d", sources=[str(folder / "causal_conv1d.cu")])


_mod = _compile()


class ModelNew(nn.Module):
    def __init__(self, channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, kernel_size, groups=channels, bias=True)

    def forward(self, x):
        return _mod.causal_conv1d(x, self.conv.weight[:, 0, :], self.conv.bias)

"""Row L2 normalisation as a host C++ extension (load_inline with cpp_sources only, no CUDA):
at::parallel_for over rows, one pass for the sum of squares and one for the scale. A CPU
candidate; it needs a C++ compiler, not a GPU."""
# task: 12_l2_normalize
# backend: cuda
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>

torch::Tensor l2_normalize_cpu(torch::Tensor x, double eps) {
    TORCH_CHECK(!x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CPU tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1), rows = cols ? xc.numel() / cols : 0;
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* xr = xp + r * cols;
            float* yr = yp + r * cols;
            double ss = 0.0;
            for (int64_t c = 0; c < cols; ++c) ss += (double)xr[c] * xr[c];
            const float inv = 1.f / std::fmax((float)std::sqrt(ss), (float)eps);
            for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv;
        }
    });
    return y;
}
"""

cpu_ext = load_inline(
    name="honest11_l2_normalize_cpu",
    cpp_sources=CPP,
    functions=["l2_normalize_cpu"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, eps=1e-12):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return cpu_ext.l2_normalize_cpu(x, self.eps)

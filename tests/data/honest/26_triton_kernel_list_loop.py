"""Group norm in Triton as a two-stage pipeline (per-group statistics, then normalise + affine):
the stages are kept in a list and launched in a loop with their own grids."""
# task: 15_group_norm
# backend: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def group_stats(x_ptr, stats_ptr, group_size, eps, BLOCK: tl.constexpr):
    g = tl.program_id(0).to(tl.int64)
    s = tl.zeros([BLOCK], tl.float32)
    ss = tl.zeros([BLOCK], tl.float32)
    for start in range(0, group_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + g * group_size + offs, mask=offs < group_size, other=0.0)
        s += v
        ss += v * v
    mean = tl.sum(s, axis=0) / group_size
    var = tl.sum(ss, axis=0) / group_size - mean * mean
    tl.store(stats_ptr + 2 * g, mean)
    tl.store(stats_ptr + 2 * g + 1, 1.0 / tl.sqrt(var + eps))


@triton.jit
def group_apply(x_ptr, stats_ptr, w_ptr, b_ptr, y_ptr, n, hw, channels, cpg, BLOCK: tl.constexpr):
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    mask = offs < n
    c = (offs // hw) % channels
    g = offs // (hw * cpg)
    x = tl.load(x_ptr + offs, mask=mask)
    mean = tl.load(stats_ptr + 2 * g, mask=mask)
    inv = tl.load(stats_ptr + 2 * g + 1, mask=mask)
    w = tl.load(w_ptr + c, mask=mask)
    b = tl.load(b_ptr + c, mask=mask)
    tl.store(y_ptr + offs, (x - mean) * inv * w + b, mask=mask)


STAGES = [group_stats, group_apply]


class ModelNew(nn.Module):
    def __init__(self, num_groups, channels, eps=1e-5):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        groups = n * self.num_groups
        group_size = x.numel() // groups
        stats = torch.empty(groups, 2, device=x.device, dtype=torch.float32)
        y = torch.empty_like(x)
        launches = [
            ((groups,), (x, stats, group_size, self.eps), 1024),
            ((triton.cdiv(x.numel(), 1024),), (x, stats, self.weight, self.bias, y, x.numel(), h * w, c,
                                               c // self.num_groups), 1024),
        ]
        for kernel, (grid, args, block) in zip(STAGES, launches):
            kernel[grid](*args, BLOCK=block)
        return y

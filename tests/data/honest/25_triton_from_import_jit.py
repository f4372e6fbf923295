"""Scale + mask + softmax in Triton written with `from triton import jit` and the language
imported under its full name."""
# task: 21_scale_mask_softmax
# backend: triton
import torch
import torch.nn as nn
import triton.language as language
from triton import jit, next_power_of_2


@jit
def scale_mask_softmax_kernel(s_ptr, m_ptr, y_ptr, heads, seq, scale, BLOCK: language.constexpr):
    row = language.program_id(0).to(language.int64)
    b = row // (heads * seq)
    offs = language.arange(0, BLOCK)
    mask = offs < seq
    s = language.load(s_ptr + row * seq + offs, mask=mask, other=0.0)
    add = language.load(m_ptr + b * seq + offs, mask=mask, other=0.0)
    x = language.where(mask, s * scale + add, float("-inf"))
    x = x - language.max(x, axis=0)
    e = language.exp(x)
    language.store(y_ptr + row * seq + offs, e / language.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale=0.125):
        super().__init__()
        self.scale = scale

    def forward(self, scores, mask):
        scores = scores.contiguous()
        mask = mask.contiguous()
        y = torch.empty_like(scores)
        seq = scores.shape[-1]
        rows = scores.numel() // seq
        block = next_power_of_2(seq)
        scale_mask_softmax_kernel[(rows,)](scores, mask, y, scores.shape[1], seq, self.scale, BLOCK=block,
                                           num_warps=4 if block <= 1024 else 8)
        return y

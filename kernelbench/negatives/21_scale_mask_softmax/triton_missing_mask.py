"""Missing term: the additive key-padding mask is never loaded, so padded keys get probability."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

EXPECTED_STATUS = "incorrect"
NEEDS_GPU = True


@triton.jit
def _scale_mask_softmax(x_ptr, m_ptr, y_ptr, cols, heads, queries, sb, sh, sq, sk, scale,
                        BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    q = row % queries
    h = (row // queries) % heads
    b = row // (queries * heads)
    x_row = x_ptr + row * cols
    m_row = m_ptr + b * sb + h * sh + q * sq
    y_row = y_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        v = tl.load(x_row + start + offs, mask=mask, other=0.0) * scale
        v = tl.where(mask, v, float("-inf"))
        m_new = tl.maximum(m, v)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(v - shift)
        m = m_new
    row_max = tl.max(m, axis=0)
    shift = tl.where(row_max == float("-inf"), 0.0, row_max)
    inv = 1.0 / tl.sum(s * tl.exp(m - shift), axis=0)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        v = tl.load(x_row + start + offs, mask=mask, other=0.0) * scale
        tl.store(y_row + start + offs, tl.exp(v - shift) * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale=0.125):
        super().__init__()
        self.scale = scale

    def forward(self, scores, mask):
        scores = scores.contiguous()
        mv = mask.expand(scores.shape)  # a view: broadcast dimensions get stride 0
        y = torch.empty_like(scores)
        batch, heads, queries, cols = scores.shape
        rows = scores.numel() // cols if cols else 0
        if rows:
            block = min(triton.next_power_of_2(cols), 4096)
            _scale_mask_softmax[(rows,)](scores, mv, y, cols, heads, queries, *mv.stride(), self.scale,
                                         BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return y

"""Cross entropy in two Triton kernels: a per-row online logsumexp, then a gather of the target
logit subtracted from it (two launches, no intermediate (B, V) tensor)."""
# task: 11_cross_entropy
# backend: triton
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_lse(x_ptr, lse_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * V + offs, mask=offs < V, other=float("-inf"))
        m_new = tl.maximum(m, v)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(v - shift)
        m = m_new
    mx = tl.max(m, axis=0)
    tl.store(lse_ptr + row, mx + tl.log(tl.sum(s * tl.exp(m - mx), axis=0)))


@triton.jit
def _minus_target(x_ptr, t_ptr, lse_ptr, out_ptr, B, V, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < B
    t = tl.load(t_ptr + rows, mask=mask, other=0)
    picked = tl.load(x_ptr + rows.to(tl.int64) * V + t, mask=mask, other=0.0)
    tl.store(out_ptr + rows, tl.load(lse_ptr + rows, mask=mask, other=0.0) - picked, mask=mask)


class ModelNew(nn.Module):
    def forward(self, logits, targets):
        logits = logits.contiguous()
        B, V = logits.shape
        lse = torch.empty(B, device=logits.device, dtype=torch.float32)
        out = torch.empty_like(lse)
        _row_lse[(B,)](logits, lse, V, BLOCK=1024, num_warps=8)
        _minus_target[(triton.cdiv(B, 256),)](logits, targets, lse, out, B, V, BLOCK=256)
        return out

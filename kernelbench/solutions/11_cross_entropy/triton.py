"""Per-row cross-entropy in one Triton kernel: one program per row makes a single online pass
(running max and sum of exp in float32) over column blocks, then subtracts the target logit.
The logits are read once instead of five times with full-size temporaries."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cross_entropy_rows(x_ptr, t_ptr, loss_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        v = tl.load(x_row + start + offs, mask=start + offs < cols, other=float("-inf"))
        m_new = tl.maximum(m, v)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - shift) + tl.exp(v - shift)
        m = m_new
    row_max = tl.max(m, axis=0)
    shift = tl.where(row_max == float("-inf"), 0.0, row_max)
    total = tl.sum(s * tl.exp(m - shift), axis=0)
    target = tl.load(t_ptr + row)
    valid = (target >= 0) & (target < cols)
    picked = tl.load(x_row + tl.where(valid, target, 0))
    loss = tl.log(total) + shift - picked
    tl.store(loss_ptr + row, tl.where(valid, loss, float("nan")))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        logits = logits.contiguous()
        targets = targets.contiguous()
        rows, cols = logits.shape
        loss = torch.empty(rows, device=logits.device, dtype=logits.dtype)
        if rows:
            block = min(triton.next_power_of_2(cols), 4096)
            _cross_entropy_rows[(rows,)](logits, targets, loss, cols, BLOCK=block,
                                         num_warps=8 if block >= 2048 else 4)
        return loss

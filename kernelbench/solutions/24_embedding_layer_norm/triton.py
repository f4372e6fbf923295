"""Embedding gather + position add + layer norm in one Triton kernel: one program per token
gathers its word and position rows and computes mean, centred variance and the affine output
from them (three passes over rows that stay in L1/L2), never writing the summed embedding.
An out-of-range id yields a NaN row instead of reading out of bounds."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _embedding_layer_norm(ids_ptr, word_ptr, pos_ptr, w_ptr, b_ptr, y_ptr, seq_len, vocab, cols, eps,
                          BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    token = tl.load(ids_ptr + row)
    valid = (token >= 0) & (token < vocab)
    word_row = word_ptr + tl.where(valid, token, 0) * cols
    pos_row = pos_ptr + (row % seq_len) * cols
    y_row = y_ptr + row * cols
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        acc += tl.load(word_row + start + offs, mask=mask, other=0.0) + \
            tl.load(pos_row + start + offs, mask=mask, other=0.0)
    mean = tl.sum(acc, axis=0) / cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        h = tl.load(word_row + start + offs, mask=mask, other=0.0) + \
            tl.load(pos_row + start + offs, mask=mask, other=0.0)
        d = tl.where(mask, h - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        h = tl.load(word_row + start + offs, mask=mask, other=0.0) + \
            tl.load(pos_row + start + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0)
        b = tl.load(b_ptr + start + offs, mask=mask, other=0.0)
        out = (h - mean) * rstd * w + b
        tl.store(y_row + start + offs, tl.where(valid, out, float("nan")), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, vocab_size, max_positions, hidden_size, eps=1e-12):
        super().__init__()
        self.eps = eps
        self.word_emb = nn.Embedding(vocab_size, hidden_size)
        self.pos_emb = nn.Embedding(max_positions, hidden_size)
        self.weight = nn.Parameter(torch.randn(hidden_size))
        self.bias = nn.Parameter(torch.randn(hidden_size))

    def forward(self, ids):
        ids = ids.contiguous()
        batch, seq_len = ids.shape
        vocab, cols = self.word_emb.weight.shape
        if seq_len > self.pos_emb.weight.shape[0]:
            raise ValueError("seq_len exceeds the number of positions")
        y = torch.empty(batch, seq_len, cols, device=ids.device, dtype=self.word_emb.weight.dtype)
        if ids.numel() and cols:
            block = min(triton.next_power_of_2(cols), 4096)
            _embedding_layer_norm[(ids.numel(),)](ids, self.word_emb.weight, self.pos_emb.weight, self.weight,
                                                  self.bias, y, seq_len, vocab, cols, self.eps, BLOCK=block,
                                                  num_warps=8 if block >= 2048 else 4)
        return y

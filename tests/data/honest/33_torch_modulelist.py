"""Word + position embeddings kept in an nn.ModuleList, summed, then F.layer_norm."""
# task: 24_embedding_layer_norm
# backend: torch
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, vocab_size, max_positions, hidden_size, eps=1e-12):
        super().__init__()
        self.eps = eps
        self.embeddings = nn.ModuleList(
            [nn.Embedding(vocab_size, hidden_size), nn.Embedding(max_positions, hidden_size)]
        )
        self.weight = nn.Parameter(torch.randn(hidden_size))
        self.bias = nn.Parameter(torch.randn(hidden_size))

    def forward(self, ids):
        word, pos = self.embeddings
        h = word(ids) + pos(torch.arange(ids.shape[1], device=ids.device))[None]
        return F.layer_norm(h, (h.shape[-1],), self.weight, self.bias, self.eps)

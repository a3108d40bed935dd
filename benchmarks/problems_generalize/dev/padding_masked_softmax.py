"""Attention probabilities with a key-padding mask: padded keys (mask False) get -inf, softmax over keys."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        # scores: (batch, queries, keys); keep: (batch, keys), True where the key is a real token
        return torch.softmax(scores.masked_fill(~keep[:, None, :], float("-inf")), dim=-1)


def get_inputs():
    batch, t = 8, 128
    lengths = torch.randint(t // 4, t + 1, (batch,))
    keep = torch.arange(t)[None, :] < lengths[:, None]
    return [2.0 * torch.randn(batch, t, t), keep]


def get_init_inputs():
    return []

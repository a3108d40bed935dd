"""Attention-style softmax: scores (batch*heads, T, T) scaled by 1/sqrt(head_dim), causal mask, softmax."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        t = scores.shape[-1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=scores.device), diagonal=1)
        return torch.softmax((scores * self.scale).masked_fill(mask, float("-inf")), dim=-1)


batch_heads, seq, head_dim = 64, 1024, 64


def get_inputs():
    return [4.0 * torch.randn(batch_heads, seq, seq)]


def get_init_inputs():
    return [head_dim]

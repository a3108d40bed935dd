"""Inclusive prefix sum along the last dimension (torch.cumsum)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return []

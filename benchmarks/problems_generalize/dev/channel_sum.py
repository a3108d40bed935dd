"""The sum over the channel dimension of a [batch, channels, length] activation (a reduction over a
middle dimension: the values summed are `length` apart in memory)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


def get_inputs():
    return [torch.randn(16, 96, 512)]


def get_init_inputs():
    return []

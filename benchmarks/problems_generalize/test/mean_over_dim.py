"""A reduction over a middle dimension: the mean over the sequence of (batch, seq, features)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=1)


def get_inputs():
    return [torch.randn(32, 256, 128)]


def get_init_inputs():
    return []

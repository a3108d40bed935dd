"""Overlapping max pooling along the sequence of a [batch, channels, length] activation: window 3,
stride 2, one position of padding on each side."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(16, 64, 1024)]


def get_init_inputs():
    return []

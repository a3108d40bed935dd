"""GELU with the tanh approximation (approximate="tanh"), no bias: an MLP activation."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []

"""Bias add then tanh-approximated GELU written out (several kernels in eager); 16384 x 4096 fp32."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.bias
        return 0.5 * y * (1.0 + torch.tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)))


rows, dim = 16384, 4096


def get_inputs():
    return [torch.randn(rows, dim)]


def get_init_inputs():
    return [dim]

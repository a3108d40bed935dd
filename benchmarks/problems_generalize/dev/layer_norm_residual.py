"""A transformer's post-residual LayerNorm: norm(x + residual) over the hidden size."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(hidden))
            self.norm.bias.add_(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual)


def get_inputs():
    return [torch.randn(8, 64, 768), torch.randn(8, 64, 768)]


def get_init_inputs():
    return [768]

"""RMSNorm as a model writes it, inside an unmodified block: x * rsqrt(mean(x^2) + eps) * weight."""
import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = RMSNorm(dim)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.norm(hidden)


def get_inputs():
    return [torch.randn(4, 64, 512)]


def get_init_inputs():
    return [512]

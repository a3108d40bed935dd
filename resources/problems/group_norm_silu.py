"""GroupNorm followed by SiLU, as in a diffusion U-Net block."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(channels))
            self.norm.bias.add_(0.1 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(x))


batch, channels, groups, size = 4, 64, 8, 16


def get_inputs():
    return [torch.randn(batch, channels, size, size)]


def get_init_inputs():
    return [channels, groups]

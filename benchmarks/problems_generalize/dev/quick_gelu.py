"""The "quick" GELU of CLIP-style models: x * sigmoid(1.702 * x)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []

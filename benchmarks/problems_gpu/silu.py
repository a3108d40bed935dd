"""SiLU alone (the gate of a SwiGLU without its product), 16384 x 4096 fp32."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


rows, dim = 16384, 4096


def get_inputs():
    return [torch.randn(rows, dim)]


def get_init_inputs():
    return []

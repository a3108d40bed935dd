"""Running totals along each sequence (the second problem of the cumulative-sum family, for
``memory_effect.py``): another name, another size and another layout than ``dev/cumsum_rows``."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, counts: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(counts, dim=-1)


def get_inputs():
    return [torch.rand(8, 64, 384)]


def get_init_inputs():
    return []

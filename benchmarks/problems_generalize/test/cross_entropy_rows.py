"""Per-example cross-entropy loss of logits against class indices (reduction="none")."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target, reduction="none")


def get_inputs():
    batch, classes = 256, 1000
    return [2.0 * torch.randn(batch, classes), torch.randint(0, classes, (batch,))]


def get_init_inputs():
    return []

import torch.nn as nn
from torch.nn import Module
import torch
import torch.nn.functional as F
import torch.jit as jit
from torch.utils._jit_tracer import trace_module

class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    @jit.script
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * rms * self.weight

rows, dim = 16384, 4096

inputs = get_inputs()
init_inputs = get_init_inputs()

model = ModelNew(dim)
model_optimized = trace_module(model, inputs)

print(model_optimized)

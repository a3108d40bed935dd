import torch
import torch.nn as nn
import torch.jit as jit

class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(dim))
            self.norm.bias.add_(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Replace the following line with your custom Triton kernel
        return self.norm(x)

# Define the custom Triton kernel
@jit.script
def custom_layer_norm(input_data: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    output_data = input_data
    for i in range(input_data.shape[0]):
        output_data[i] = (input_data[i] - beta) / gamma
    return output_data

class TritonKernelLayerNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.randn(dim))
        self.beta = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return custom_layer_norm(x, self.gamma, self.beta)

# Replace the forward method with the custom Triton kernel
ModelNew.forward = TritonKernelLayerNorm.forward

# Define the inputs
inputs = [torch.randn(rows, dim)]

# Define the init inputs
init_inputs = [dim]

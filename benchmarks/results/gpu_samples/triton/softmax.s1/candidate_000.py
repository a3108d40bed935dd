import torch
import torch.nn as nn
import torch.jit as jit
from torch.nn.functional import softmax

# Define the custom Triton kernel for row softmax
@jit.script
def row_softmax_kernel(input_data, output_data, batch_size, num_rows, num_cols):
    for i in range(batch_size):
        for j in range(num_rows):
            for k in range(num_cols):
                output_data[i, j, k] = softmax(input_data[i, j, k])

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Compute the number of batches, rows, and cols
        batch_size, num_rows, num_cols = x.size()
        
        # Allocate memory for the input and output data
        input_data = x.contiguous()
        output_data = torch.empty_like(input_data).float()
        
        # Call the custom Triton kernel
        row_softmax_kernel(input_data, output_data, batch_size, num_rows, num_cols)
        
        return output_data

# Example usage
inputs = get_inputs()
model = ModelNew()
output = model(*inputs)
print(output.shape)  # Should be (8192, 4096)

"""Candidate for bias_leaky_relu_scale: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

// The reference lowered to plain loops: rows in parallel; every output value computed from the inputs at
// its own position, in one pass. Correct by construction; no reduction.
__global__ void lowered_rows(const float* x, const float* bias, float* out, int64_t rows, int64_t cols, float scale) {
    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;  // a warp a row
    const int lane = threadIdx.x % 32;
    if (r < rows) {
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_add = (x[r * cols + c] + bias[c]);
            const bool v_gt = (v_add > 0.0f);
            const float v_mul = (v_add * 0.2f);
            const float v_where = (v_gt ? v_add : v_mul);
            const float v_mul_1 = (v_where * scale);
            out[r * cols + c] = v_mul_1;
        }
    }
}

extern "C" void kernel_forward(const float* x, const float* bias, float* out, int64_t rows, int64_t cols, float scale, cudaStream_t stream) {
    if (rows <= 0) return;
    // Determine the block size based on the row length and the number of SMs available
    const int block_size = 32;  // Initial block size
    const int num_sm = 16;  // Number of SMs available (assuming 16 SMs)
    int num_blocks = (rows + block_size - 1) / block_size;  // Calculate number of blocks needed

    if (num_blocks > num_sm) {
        // If there are too many blocks, reduce the block size
        const int num_blocks_per_sm = num_blocks / num_sm;
        const int block_size = num_blocks_per_sm * block_size;
        num_blocks = num_blocks % num_sm;
    }

    lowered_rows<<<num_blocks, block_size, 0, stream>>>(x, bias, out, rows, cols, scale);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int, scale: float = 1.41421356):
        super().__init__()
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.kernel_forward(x, self.bias.contiguous(), out, x.numel() // x.shape[-1], x.shape[-1], float(self.scale))
        return out

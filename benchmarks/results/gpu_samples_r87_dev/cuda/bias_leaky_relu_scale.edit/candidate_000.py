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
__global__ void lowered_rows(const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ out, int64_t rows, int64_t cols, float scale) {
    // a warp a row; the warps of the whole grid stride over the rows, so any grid covers them all
    // (threads per block: a multiple of 32)
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
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
    const int T = 512; // Adjust this value to get the best performance
    const int blocks = ((rows * 32 + T - 1) / T) / 32;
    lowered_rows<<<blocks, T, 0, stream>>>(x, bias, out, rows, cols, scale);
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

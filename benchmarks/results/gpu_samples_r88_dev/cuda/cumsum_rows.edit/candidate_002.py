"""Candidate for cumsum_rows: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

// The reference lowered to plain loops: rows in parallel; per row, one loop in order over the values,
// a running sum carried from each value to the next. Correct by construction.
__global__ void lowered_rows(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    // a warp a row; the warps of the whole grid stride over the rows, so any grid covers them all
    // (threads per block: a multiple of 32)
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        float v_cumsum_run = 0.0f;  // the running sum along the row
        if (lane == 0) {  // a running sum: the values in order
            for (int64_t c = 0; c < cols; ++c) {
                v_cumsum_run += x[r * cols + c];  const float v_cumsum = v_cumsum_run;
                out[r * cols + c] = v_cumsum;
            }
        }
    }
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return;
    int64_t T = 32;  // Choose a multiple of 32 for the threads per block
    int64_t blocks = ((rows * 32 + T - 1) / T);  // Calculate the number of blocks
    lowered_rows<<<blocks, T, 0, stream>>>(x, out, rows, cols);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _lib.kernel_forward(x, out, x.numel() // x.shape[-1], x.shape[-1])
        return out

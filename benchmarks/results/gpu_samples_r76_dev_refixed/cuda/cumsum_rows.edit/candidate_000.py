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
__global__ void lowered_rows(const float* x, float* out, int64_t rows, int64_t cols) {
    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;  // a warp a row
    const int lane = threadIdx.x % 32;
    if (r < rows) {
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
    // Tune the block size for occupancy: pick the block size from the row length, several rows per block when rows are short, enough blocks to fill every SM.
    int block_size = std::max<int64_t>(64, std::min<int64_t>(512, std::ceil(std::sqrt(rows))));  // 64 to 512, 512 is max for GPU, 32 is min for CPU
    int grid_size = std::max<int64_t>(1, std::ceil(cols / block_size));  // 1 to max(cols/block_size), max(cols/block_size) is max for GPU, 32 is min for CPU
    lowered_rows<<<grid_size, block_size, 0, stream>>>(x, out, rows, cols);
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

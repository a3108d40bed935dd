"""Candidate for cumsum_rows: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* x, float* out, int64_t rows, int64_t cols) {
    const int64_t sm_count = gridDim.x * blockDim.x;  // the number of SMs in the grid
    const int64_t sm_per_thread = 32;  // the number of threads per SM
    const int64_t r_start = blockIdx.x * sm_count * sm_per_thread;  // the starting row for this thread
    const int64_t r_end = r_start + sm_count * sm_per_thread - 1;  // the ending row for this thread
    const int64_t r = r_end / sm_per_thread;  // the row within the SMs for this thread
    const int lane = threadIdx.x % sm_per_thread;
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
    lowered_rows<<<(unsigned)((rows * 32 + 255) / 256), 256, 0, stream>>>(x, out, rows, cols);
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

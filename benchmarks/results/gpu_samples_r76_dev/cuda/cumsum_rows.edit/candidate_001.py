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
    // Stage the row into shared memory once and reuse it for every pass.
    extern __shared__ float shared_row[32];  // a warp a row

    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;  // a warp a row
    const int lane = threadIdx.x % 32;
    if (r < rows) {
        float v_cumsum_run = 0.0f;  // the running sum along the row
        if (lane == 0) {  // a running sum: the values in order
            shared_row[0] = x[r * cols + 0];  // store the first value in shared memory
            for (int64_t c = 1; c < cols; ++c) {
                v_cumsum_run += shared_row[0];  // add the first value to the running sum
                shared_row[0] = x[r * cols + c];  // update the first value to the next value
            }
            out[r * cols + 0] = v_cumsum_run;  // write the first value to the output
        }
        // Read the remaining values from shared memory and update the running sum
        for (int64_t c = 1; c < cols; ++c) {
            v_cumsum_run += shared_row[c];  // add the current value to the running sum
            shared_row[c] = x[r * cols + c];  // update the current value to the next value
            out[r * cols + c] = v_cumsum_run;  // write the current value to the output
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

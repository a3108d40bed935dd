"""Candidate for cumsum_rows: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    const int4_t row4 = make_float4(x[(int64_t)blockIdx.x * blockDim.x + threadIdx.x], 0, 0, 0);
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        if (lane == 0) {  // a running sum: the values in order
            float4 v_cumsum_run = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // the running sum along the row
            if (cols % 4 == 0) {
                for (int64_t c = 0; c < cols; c += 4) {
                    v_cumsum_run += row4;
                    float4 v_cumsum = v_cumsum_run;
                    out[r * cols + c] = v_cumsum.x;
                    out[r * cols + c + 1] = v_cumsum.y;
                    out[r * cols + c + 2] = v_cumsum.z;
                    out[r * cols + c + 3] = v_cumsum.w;
                }
            } else {
                for (int64_t c = 0; c < cols; ++c) {
                    v_cumsum_run += row4;
                    float v_cumsum = v_cumsum_run;
                    out[r * cols + c] = v_cumsum.x;
                }
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

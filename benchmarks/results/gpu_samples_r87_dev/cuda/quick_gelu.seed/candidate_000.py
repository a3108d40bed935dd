"""Candidate for quick_gelu: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

// The reference lowered to plain loops: rows in parallel; every output value computed from the inputs at
// its own position, in one pass. Correct by construction; no reduction.
__global__ void lowered_rows(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    // a warp a row; the warps of the whole grid stride over the rows, so any grid covers them all
    // (threads per block: a multiple of 32)
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_mul = (x[r * cols + c] * 1.702f);
            const float v_sigmoid = (1.0f / (1.0f + expf(-v_mul)));
            const float v_mul_1 = (x[r * cols + c] * v_sigmoid);
            out[r * cols + c] = v_mul_1;
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

"""Candidate for l1_normalize: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

// The reference lowered to plain loops: rows in parallel; per row, one pass per reduction, then the outputs.
// Correct by construction, not fast: each reduction reads the row again.
__global__ void lowered_rows(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols) {
    // a warp a row; the warps of the whole grid stride over the rows, so any grid covers them all
    // (threads per block: a multiple of 32)
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        float v_sum_1 = 0.0f;
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_abs_1 = fabsf(x[r * cols + c]);
            v_sum_1 += v_abs_1;
        }
        for (int k = 16; k > 0; k >>= 1) v_sum_1 += __shfl_xor_sync(0xffffffff, v_sum_1, k);
        const float v_clamp = ((v_sum_1 > 1e-06f || v_sum_1 != v_sum_1) ? v_sum_1 : 1e-06f);
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_div = (x[r * cols + c] / v_clamp);
            out[r * cols + c] = v_div;
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

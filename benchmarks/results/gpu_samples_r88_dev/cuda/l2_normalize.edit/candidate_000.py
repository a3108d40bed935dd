"""Candidate for l2_normalize: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

// The reference lowered to plain loops: rows in parallel; per row, one pass per reduction, then the outputs.
// Correct by construction, not fast: each reduction reads the row again.
__global__ void lowered_rows(const float* __restrict__ emb, float* __restrict__ out, int64_t rows, int64_t cols) {
    // a warp a row; the warps of the whole grid stride over the rows, so any grid covers them all
    // (threads per block: a multiple of 32)
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        float v_sum_1 = 0.0f;
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_pow_1 = (emb[r * cols + c] * emb[r * cols + c]);
            v_sum_1 += v_pow_1;
        }
        for (int k = 16; k > 0; k >>= 1) v_sum_1 += __shfl_xor_sync(0xffffffff, v_sum_1, k);
        const float v_pow_2 = sqrtf(v_sum_1);
        const float v_clamp = ((v_pow_2 > 1e-12f || v_pow_2 != v_pow_2) ? v_pow_2 : 1e-12f);
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_expand = v_clamp;
            const float v_div = (emb[r * cols + c] / v_expand);
            out[r * cols + c] = v_div;
        }
    }
}

extern "C" void kernel_forward(const float* emb, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return;
    // Start from the first 32 rows to avoid early termination due to NaNs.
    lowered_rows<<<((unsigned)((rows * 32 + 255) / 256), 256, 0, stream>>>(emb, out, rows, cols);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, emb):
        emb = emb.contiguous()
        out = torch.empty_like(emb)
        _lib.kernel_forward(emb, out, emb.numel() // emb.shape[-1], emb.shape[-1])
        return out

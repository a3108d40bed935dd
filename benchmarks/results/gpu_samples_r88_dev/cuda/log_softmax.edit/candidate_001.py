"""Candidate for log_softmax: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* __restrict__ logits, float* __restrict__ out, int64_t rows, int64_t cols) {
    const int lane = threadIdx.x % 32;
    const int64_t warps = ((int64_t)gridDim.x * blockDim.x + 31) / 32;
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        float v_amax = (-INFINITY);
        for (int64_t c = lane; c < cols; c += 32) {
            v_amax = fmaxf(v_amax, logits[r * cols + c]);
        }
        // Precompute reciprocals for exp and division
        const float v_recip_amax = 1.0f / v_amax;
        for (int k = 16; k > 0; k >>= 1) v_amax = __shfl_xor_sync(0xffffffff, v_amax, k);
        float v_sum_1 = 0.0f;
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_sub = (logits[r * cols + c] - v_amax);
            const float v_exp = __expf(v_sub * v_recip_amax);
            v_sum_1 += v_exp;
        }
        // Precompute reciprocals for exp and division
        const float v_recip_sum_1 = 1.0f / v_sum_1;
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_sub = (logits[r * cols + c] - v_amax);
            const float v_sub_1 = __fdividef(v_sub, v_sum_1 * v_recip_sum_1);
            out[r * cols + c] = v_sub_1;
        }
    }
}

extern "C" void kernel_forward(const float* logits, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return;
    lowered_rows<<<(unsigned)((rows * 32 + 255) / 256), 256, 0, stream>>>(logits, out, rows, cols);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits):
        logits = logits.contiguous()
        out = torch.empty_like(logits)
        _lib.kernel_forward(logits, out, logits.numel() // logits.shape[-1], logits.shape[-1])
        return out

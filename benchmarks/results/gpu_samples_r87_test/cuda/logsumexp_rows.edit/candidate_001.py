"""Candidate for logsumexp_rows: a scaffolded ModelNew around a native kernel."""
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
    for (int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += warps) {
        const float* row = &x[r * cols];
        float v_amax = (-INFINITY);
        for (int64_t c = lane; c < cols; c += 32) {
            v_amax = fmaxf(v_amax, row[c]);
        }
        for (int k = 16; k > 0; k >>= 1) v_amax = fmaxf(v_amax, __shfl_xor_sync(0xffffffff, v_amax, k));
        const float v_abs_1 = fabsf(v_amax);
        const bool v_eq = (v_abs_1 == INFINITY);
        const float v_scalar_tensor = 0.0f;
        const float v_where = (v_eq ? v_scalar_tensor : v_amax);
        const float v_squeeze = v_where;
        float v_sum_1 = 0.0f;
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_sub = (row[c] - v_where);
            const float v_exp = expf(v_sub);
            v_sum_1 += v_exp;
        }
        for (int k = 16; k > 0; k >>= 1) v_sum_1 += __shfl_xor_sync(0xffffffff, v_sum_1, k);
        const float v_log = logf(v_sum_1);
        const float v_add = (v_log + v_squeeze);
        if (lane == 0) out[r] = v_add;
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
        out = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
        _lib.kernel_forward(x, out, x.numel() // x.shape[-1], x.shape[-1])
        return out

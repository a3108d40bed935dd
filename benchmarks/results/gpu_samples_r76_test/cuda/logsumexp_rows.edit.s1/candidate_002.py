"""Candidate for logsumexp_rows: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* x, float* out, int64_t rows, int64_t cols) {
    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;  // a warp a row
    const int lane = threadIdx.x % 32;
    if (r < rows) {
        const float4* x4 = (float4*)x;  // vectorized access if cols is a multiple of 4
        float4* out4 = (float4*)out;  // vectorized access
        if (cols % 4 == 0) {
            float4 v_amax = make_float4(-INFINITY);
            for (int64_t c = lane; c < cols; c += 32) {
                v_amax = fmaxv(v_amax, x4[r * cols + c]);
            }
            for (int k = 16; k > 0; k >>= 1) v_amax = fmaxv(v_amax, __shfl_xor_sync(0xffffffff, v_amax, k));
            const float v_abs_1 = fabsf(v_amax);
            const bool v_eq = (v_abs_1 == INFINITY);
            const float v_scalar_tensor = 0.0f;
            const float v_where = (v_eq ? v_scalar_tensor : v_amax);
            const float v_squeeze = v_where;
            float v_sum_1 = 0.0f;
            for (int64_t c = lane; c < cols; c += 32) {
                const float4 v_sub = (x4[r * cols + c] - v_where);
                const float4 v_exp = expf(v_sub);
                v_sum_1 += v_exp;
            }
            for (int k = 16; k > 0; k >>= 1) v_sum_1 += __shfl_xor_sync(0xffffffff, v_sum_1, k);
            const float v_log = logf(v_sum_1);
            const float v_add = (v_log + v_squeeze);
            if (lane == 0) out4[r] = make_float4(v_add);
        } else {
            float v_amax = make_float4(-INFINITY);
            for (int64_t c = lane; c < cols - 3; c += 4) {
                v_amax = fmaxf(v_amax, make_float4(x4[r * cols + c], x4[r * cols + c + 1], x4[r * cols + c + 2], x4[r * cols + c + 3]));
            }
            v_amax = fmaxf(v_amax, x4[r * cols + cols - 1]);
            for (int k = 16; k > 0; k >>= 1) v_amax = fmaxv(v_amax, __shfl_xor_sync(0xffffffff, v_amax, k));
            const float v_abs_1 = fabsf(v_amax);
            const bool v_eq = (v_abs_1 == INFINITY);
            const float v_scalar_tensor = 0.0f;
            const float v_where = (v_eq ? v_scalar_tensor : v_amax);
            const float v_squeeze = v_where;
            float v_sum_1 = 0.0f;
            for (int64_t c = lane; c < cols - 3; c += 4) {
                const float4 v_sub = (make_float4(x4[r * cols + c], x4[r * cols + c + 1], x4[r * cols + c + 2], x4[r * cols + c + 3]) - v_where);
                const float4 v_exp = expf(v_sub);
                v_sum_1 += v_exp;
            }
            const float4 v_exp = make_float4(expf(x4[r * cols + cols - 1]) - v_where);
            v_sum_1 += v_exp;
            const float v_log = logf(v_sum_1);
            const float v_add = (v_log + v_squeeze);
            if (lane == 0) out4[r] = make_float4(v_add);
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
        out = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
        _lib.kernel_forward(x, out, x.numel() // x.shape[-1], x.shape[-1])
        return out

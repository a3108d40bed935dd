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
        float v_amax = (-INFINITY);
        float v_sum = 0.0f;
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_sub = (x[r * cols + c] - v_amax);
            const float v_exp = expf(v_sub);
            if (v_sub > v_amax) {
                v_amax = v_sub;
                v_sum = v_exp;
            } else {
                v_sum += v_exp;
            }
        }
        const float v_log = logf(v_sum);
        if (lane == 0) out[r] = v_log;
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

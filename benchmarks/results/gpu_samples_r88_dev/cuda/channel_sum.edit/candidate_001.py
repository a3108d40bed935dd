"""Candidate for channel_sum: a scaffolded ModelNew around a native kernel."""
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
constexpr int64_t louter = 16, lcols = 96, linner = 512;

__global__ void lowered_rows(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols, int64_t x_size0, int64_t x_size1, int64_t x_size2, int64_t out_size0, int64_t out_size1) {
    const int64_t threads = (int64_t)gridDim.x * blockDim.x;
    for (int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; r < louter * linner; r += threads) {
        const int64_t o = r / linner, i = r % linner;
        float4 v_sum_1 = 0.0f;
        if (r % linner == 0) {
            for (int64_t c = 0; c < lcols; c += 4) {
                float4 v = load4x4x1(x + (o * lcols + c) * linner + i);
                v_sum_1 += v;
            }
        }
        for (int64_t c = 4; c < lcols; ++c) {
            v_sum_1 += x[(o * lcols + c) * linner + i];
        }
        store4x4x1(out + r, v_sum_1);
    }
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, int64_t x_size0, int64_t x_size1, int64_t x_size2, int64_t out_size0, int64_t out_size1, cudaStream_t stream) {
    if (louter * linner <= 0) return;
    lowered_rows<<<(unsigned)((louter * linner + 127) / 128), 128, 0, stream>>>(x, out, rows, cols, x_size0, x_size1, x_size2, out_size0, out_size1);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty((16, 512), dtype=torch.float32, device=x.device)
        _lib.kernel_forward(x, out, x.numel() // x.shape[-1], x.shape[-1], x.shape[0], x.shape[1], x.shape[2], out.shape[0], out.shape[1])
        return out

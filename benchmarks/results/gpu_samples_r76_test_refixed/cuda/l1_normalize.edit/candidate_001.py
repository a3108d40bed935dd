"""Candidate for l1_normalize: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* x, float* out, int64_t rows, int64_t cols) {
    __shared__ float tile[32];

    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;  // a warp a row
    const int lane = threadIdx.x % 32;
    if (r < rows) {
        float v_sum_1 = 0.0f;
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_abs_1 = fabsf(x[r * cols + c]);
            tile[lane] = v_abs_1;
        }
        __syncthreads();
        for (int k = 16; k > 0; k >>= 1) v_sum_1 += __shfl_xor_sync(0xffffffff, v_sum_1, k);
        const float v_clamp = fmaxf(v_sum_1, 1e-06f);
        __syncthreads();
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_div = (tile[lane] / v_clamp);
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

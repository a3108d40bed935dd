"""Candidate for quick_gelu: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

__global__ void lowered_rows(const float* x, float* out, int64_t rows, int64_t cols) {
    extern __shared__ float sdata[];

    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;  // a warp a row
    const int lane = threadIdx.x % 32;
    if (r < rows) {
        sdata[0] = x[r * cols + lane];
        for (int64_t c = lane; c < cols; c += 32) {
            const float v_mul = (sdata[0] * 1.702f);
            const float v_sigmoid = (1.0f / (1.0f + expf(-v_mul)));
            const float v_mul_1 = (sdata[0] * v_sigmoid);
            sdata[0] = v_mul_1;
        }
        out[r * cols + lane] = sdata[0];
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

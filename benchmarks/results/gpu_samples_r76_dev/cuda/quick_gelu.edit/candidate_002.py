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
    const int64_t nthreads = blockDim.x * blockDim.y;
    const int64_t r = blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t c = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        const float v_mul = (x[r * cols + c] * 1.702f);
        const float v_sigmoid = (1.0f / (1.0f + expf(-v_mul)));
        const float v_mul_1 = (x[r * cols + c] * v_sigmoid);
        out[r * cols + c] = v_mul_1;
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

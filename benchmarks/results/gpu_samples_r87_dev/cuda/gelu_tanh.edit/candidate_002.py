"""Candidate for gelu_tanh: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
// Each thread takes ROWS rows of its 4 columns: their loads are issued together (enough bytes in flight).
constexpr int ROWS = 4;

// the 4 values at offsets c..c+3 of p (c a multiple of 4); offsets >= n read as `fill` (and are not read).
// vec: p is 16-byte aligned, so 4 values below n are one float4 load.
__device__ __forceinline__ float4 load4(const float* p, int64_t c, int64_t n, bool vec, float fill) {
    if (vec && c + 4 <= n) return *reinterpret_cast<const float4*>(p + c);
    return make_float4(c < n ? p[c] : fill, c + 1 < n ? p[c + 1] : fill,
                       c + 2 < n ? p[c + 2] : fill, c + 3 < n ? p[c + 3] : fill);
}

__device__ __forceinline__ void store4(float* p, int64_t c, int64_t n, bool vec, float4 v) {
    if (vec && c + 4 <= n) {
        *reinterpret_cast<float4*>(p + c) = v;
        return;
    }
    if (c < n) p[c] = v.x;
    if (c + 1 < n) p[c + 1] = v.y;
    if (c + 2 < n) p[c + 2] = v.z;
    if (c + 3 < n) p[c + 3] = v.w;
}

// 0.5 * y * (1 + tanh(sqrt(2 / pi) * (y + 0.044715 * y^3)))
__device__ __forceinline__ float gelu(float y) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;
    return 0.5f * y * (1.0f + tanhf(k0 * (y + k1 * y * y * y)));
}

__global__ void bias_gelu_tanh(const float* __restrict__ x, float* __restrict__ out,
                              int64_t rows, int64_t cols, bool vec) {
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;  // this thread's 4 columns
    if (c >= cols) return;
    const float4 b = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // the same for every row
    for (int64_t r0 = (int64_t)blockIdx.y * ROWS; r0 < rows; r0 += (int64_t)gridDim.y * ROWS) {
        float4 a[ROWS];
#pragma unroll
        for (int k = 0; k < ROWS; ++k)
            a[k] = r0 + k < rows ? load4(x + (r0 + k) * cols, c, cols, vec, 0.0f) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int k = 0; k < ROWS; ++k)
            if (r0 + k < rows)
                store4(out + (r0 + k) * cols, c, cols, vec, make_float4(gelu(a[k].x + b.x), gelu(a[k].y + b.y),
                                                                        gelu(a[k].z + b.z), gelu(a[k].w + b.w)));
    }
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    // x: blocks of 128 threads across the columns (4 each); y: groups of ROWS rows (a grid y is at most 65535)
    const int threads = 128;
    const int64_t col_blocks = (cols + threads * 4 - 1) / (threads * 4);
    const int64_t row_groups = (rows + ROWS - 1) / ROWS;
    const dim3 grid((unsigned)col_blocks, (unsigned)(row_groups < 65535 ? row_groups : 65535));
    // float4 loads need every row to start 16-byte aligned: cols % 4 == 0 and aligned pointers
    const bool vec = cols % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)out % 16 == 0;
    bias_gelu_tanh<<<grid, threads, 0, stream>>>(x, out, rows, cols, vec);
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

"""Candidate for residual_rms_norm: a scaffolded ModelNew around a native kernel."""
import torch
import torch.nn as nn
from kforge_desktop.kernels.native import load_native

KERNEL_SOURCE = r'''
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
#include <cfloat>

#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>
// Each thread keeps VEC float4 of its row in registers, so rows of up to 1024 * VEC * 4 = 32768 values
// are read from memory once. Longer rows are done in tiles of that size (the earlier tiles read twice).
constexpr int VEC = 8;

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// sum over the block (blockDim.x a multiple of 32): each warp reduces, then the warps' results
__device__ float block_sum(float v, float* smem) {
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x % 32 < blockDim.x / 32 ? smem[threadIdx.x % 32] : 0.0f;
    v = warp_sum(v);
    __syncthreads();  // smem is reused by the next reduction
    return v;
}

// the 4 values at columns c..c+3 of a row (c a multiple of 4); columns >= n read as `fill`.
// vec: the row starts 16-byte aligned, so 4 values inside the row are one float4 load.
__device__ __forceinline__ float4 load4(const float* row, int64_t c, int64_t n, bool vec, float fill) {
    if (vec && c + 4 <= n) return *reinterpret_cast<const float4*>(row + c);
    return make_float4(c < n ? row[c] : fill, c + 1 < n ? row[c + 1] : fill,
                       c + 2 < n ? row[c + 2] : fill, c + 3 < n ? row[c + 3] : fill);
}

// x + residual at columns c..c+3 of a row (past-the-end columns read as 0)
__device__ __forceinline__ float4 add4(const float* xr, const float* rr, int64_t c, int64_t n, bool vec) {
    const float4 a = load4(xr, c, n, vec, 0.0f), b = load4(rr, c, n, vec, 0.0f);
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

__device__ __forceinline__ void store4(float* row, int64_t c, int64_t n, bool vec, float4 v) {
    if (vec && c + 4 <= n) {
        *reinterpret_cast<float4*>(row + c) = v;
        return;
    }
    if (c < n) row[c] = v.x;
    if (c + 1 < n) row[c + 1] = v.y;
    if (c + 2 < n) row[c + 2] = v.z;
    if (c + 3 < n) row[c + 3] = v.w;
}

__global__ void __launch_bounds__(1024) add_rms_norm_rows(const float* __restrict__ x,
                                                          const float* __restrict__ residual,
                                                          const float* __restrict__ weight, float* __restrict__ out,
                                                          int64_t cols, float eps, bool vec) {
    __shared__ float smem[32];
    const float* xr = x + blockIdx.x * cols;
    const float* rr = residual + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    const int64_t tile = (int64_t)blockDim.x * VEC * 4;  // columns the block holds at once
    float4 v[VEC];  // v = x + residual
    float sq = 0.0f;  // this thread's sum of squares (fp32)
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {  // thread t holds float4 number k * blockDim.x + t: coalesced
            v[k] = add4(xr, rr, t0 + (k * blockDim.x + threadIdx.x) * 4, cols, vec);
            sq += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
        }
    }
    const float scale = rsqrtf(block_sum(sq, smem) / (float)cols + eps);
    // write (x + residual) * scale * weight; the last tile is still in registers (for rows up to 32768 values, the only one)
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
        const bool in_registers = t0 + tile >= cols;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int64_t c = t0 + (k * blockDim.x + threadIdx.x) * 4;
            const float4 a = in_registers ? v[k] : add4(xr, rr, c, cols, vec);
            const float4 w = load4(weight, c, cols, vec, 0.0f);
            store4(yr, c, cols, vec, make_float4(a.x * scale * w.x, a.y * scale * w.y, a.z * scale * w.z,
                                                 a.w * scale * w.w));
        }
    }
}

extern "C" void kernel_forward(const float* x, const float* residual, const float* weight, float* out, int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    // each thread handles one row (blockIdx.x is the row), so the grid stays exactly one block per row: fewer blocks would leave rows unwritten
    int64_t threads = ((cols + 3) / 4 + VEC - 1) / VEC;
    threads = (threads + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    const bool vec = cols % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)residual % 16 == 0 &&
                     (uintptr_t)weight % 16 == 0 && (uintptr_t)out % 16 == 0;
    add_rms_norm_rows<<<(unsigned)rows, (unsigned)threads, 0, stream>>>(x, residual, weight, out, cols, eps, vec);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, x, residual):
        x = x.contiguous()
        residual = residual.contiguous()
        out = torch.empty_like(x)
        _lib.kernel_forward(x, residual, self.weight.contiguous(), out, x.numel() // x.shape[-1], x.shape[-1], float(self.eps))
        return out

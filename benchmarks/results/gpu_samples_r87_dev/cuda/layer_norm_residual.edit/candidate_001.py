"""Candidate for layer_norm_residual: a scaffolded ModelNew around a native kernel."""
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
// Each thread keeps VEC float4 of its row in registers, so rows of up to 1024 * VEC * 4 = 16384 values
// are read from memory once. Longer rows are done in tiles of that size (the earlier tiles read twice).
constexpr int VEC = 4;

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

// x + residual at columns c..c+3 of a row (past-the-end columns read as 0)
__device__ __forceinline__ float4 load_sum4(const float* xr, const float* rr, int64_t c, int64_t n, bool vec) {
    const float4 a = load4(xr, c, n, vec, 0.0f), b = load4(rr, c, n, vec, 0.0f);
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// sum of (a - mean)^2 over those of the 4 values at columns c..c+3 that lie inside the row (c < n)
__device__ __forceinline__ float sq_dev4(float4 a, float mean, int64_t c, int64_t n) {
    const float dx = a.x - mean, dy = a.y - mean, dz = a.z - mean, dw = a.w - mean;
    if (c + 4 <= n) return dx * dx + dy * dy + dz * dz + dw * dw;
    return (c < n ? dx * dx : 0.0f) + (c + 1 < n ? dy * dy : 0.0f) + (c + 2 < n ? dz * dz : 0.0f);
}

__global__ void __launch_bounds__(1024) add_layer_norm_rows(const float* __restrict__ x,
                                                            const float* __restrict__ residual,
                                                            const float* __restrict__ weight,
                                                            const float* __restrict__ bias, float* __restrict__ out,
                                                            int64_t cols, float eps, bool vec) {
    __shared__ float smem[32];
    const float* xr = x + blockIdx.x * cols;
    const float* rr = residual + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    const int64_t tile = (int64_t)blockDim.x * VEC * 4;  // columns the block holds at once
    float4 v[VEC];  // v = x + residual
    // mean: sum the row (past-the-end columns read as 0)
    float s = 0.0f;
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {  // thread t holds float4 number k * blockDim.x + t: coalesced
            v[k] = load_sum4(xr, rr, t0 + (k * blockDim.x + threadIdx.x) * 4, cols, vec);
            s += v[k].x + v[k].y + v[k].z + v[k].w;
        }
    }
    const float mean = block_sum(s, smem) / (float)cols;
    // variance: mean squared deviation from the mean (exact; no E[v^2] - mean^2 cancellation).
    // The last tile is still in registers (for rows up to 16384 values, the only one).
    float sq = 0.0f;
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
        const bool in_registers = t0 + tile >= cols;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int64_t c = t0 + (k * blockDim.x + threadIdx.x) * 4;
            sq += sq_dev4(in_registers ? v[k] : load_sum4(xr, rr, c, cols, vec), mean, c, cols);
        }
    }
    const float inv_std = rsqrtf(block_sum(sq, smem) / (float)cols + eps);
    // write (v - mean) * inv_std * weight + bias
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
        const bool in_registers = t0 + tile >= cols;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int64_t c = t0 + (k * blockDim.x + threadIdx.x) * 4;
            const float4 a = in_registers ? v[k] : load_sum4(xr, rr, c, cols, vec);
            const float4 w = load4(weight, c, cols, vec, 0.0f), b = load4(bias, c, cols, vec, 0.0f);
            store4(yr, c, cols, vec, make_float4((a.x - mean) * inv_std * w.x + b.x, (a.y - mean) * inv_std * w.y + b.y,
                                                 (a.z - mean) * inv_std * w.z + b.z, (a.w - mean) * inv_std * w.w + b.w));
        }
    }
}

extern "C" void kernel_forward(const float* x, const float* residual, const float* norm_weight, const float* norm_bias, float* out, int64_t rows, int64_t cols, float norm_eps, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    int64_t threads = (cols / 4 + VEC - 1) / VEC;
    threads = (threads + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    const bool vec = cols % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)residual % 16 == 0 &&
                     (uintptr_t)norm_weight % 16 == 0 && (uintptr_t)norm_bias % 16 == 0 && (uintptr_t)out % 16 == 0;
    // Pick the threads per block from the row length (a multiple of 32, from 32 to 1024)
    // The grid stays exactly one block per row: fewer blocks would leave rows unwritten
    add_layer_norm_rows<<<(unsigned)rows, (unsigned)threads, 0, stream>>>(x, residual, norm_weight, norm_bias, out, cols, norm_eps,
 vec);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(hidden))
            self.norm.bias.add_(0.1 * torch.randn(hidden))

    def forward(self, x, residual):
        x = x.contiguous()
        residual = residual.contiguous()
        out = torch.empty_like(x)
        _lib.kernel_forward(x, residual, self.norm.weight.contiguous(), self.norm.bias.contiguous(), out, x.numel() // x.shape[-1], x.shape[-1], float(self.norm.eps))
        return out

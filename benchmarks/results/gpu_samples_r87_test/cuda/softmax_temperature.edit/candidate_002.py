"""Candidate for softmax_temperature: a scaffolded ModelNew around a native kernel."""
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
#include <cfloat>
#include <cmath>
// Each thread keeps VEC float4 of its row in registers, so rows of up to 1024 * VEC * 4 = 32768 values
// are read from memory once. Longer rows are done in tiles of that size (the earlier tiles read twice).
constexpr int VEC = 8;

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// max / sum over the block (blockDim.x a multiple of 32): each warp reduces, then the warps' results
__device__ float block_max(float v, float* smem) {
    v = warp_max(v);
    if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x % 32 < blockDim.x / 32 ? smem[threadIdx.x % 32] : -FLT_MAX;
    v = warp_max(v);
    __syncthreads();  // smem is reused by the next reduction
    return v;
}

__device__ float block_sum(float v, float* smem) {
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x % 32 < blockDim.x / 32 ? smem[threadIdx.x % 32] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
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

__global__ void __launch_bounds__(1024) softmax_rows(const float* __restrict__ x, float* __restrict__ out,
                                                     int64_t cols, float scale, bool vec) {
    __shared__ float smem[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    const int64_t tile = (int64_t)blockDim.x * VEC * 4;  // columns the block holds at once
    // columns past the row's end read as a value whose product with scale is -infinity: no part of max or sum
    const float fill = scale >= 0.0f ? -INFINITY : INFINITY;
    float4 v[VEC];
    // pass 1 (online softmax): this thread's running max m of x * scale and sum s of exp(x * scale - m)
    float m = -FLT_MAX, s = 0.0f;
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
        float tile_max = -FLT_MAX;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {  // thread t holds float4 number k * blockDim.x + t: coalesced
            v[k] = load4(xr, t0 + (k * blockDim.x + threadIdx.x) * 4, cols, vec, fill);
            tile_max = fmaxf(tile_max, fmaxf(fmaxf(v[k].x * scale, v[k].y * scale),
                                             fmaxf(v[k].z * scale, v[k].w * scale)));
        }
        const float m_new = fmaxf(m, tile_max);
        s *= __expf(m - m_new);  // rescale the sum so far to the new max
#pragma unroll
        for (int k = 0; k < VEC; ++k)
            s += __expf(fmaf(v[k].x, scale, -m_new)) + __expf(fmaf(v[k].y, scale, -m_new)) +
                 __expf(fmaf(v[k].z, scale, -m_new)) + __expf(fmaf(v[k].w, scale, -m_new));
        m = m_new;
    }
    // the row's max, then every thread's sum rescaled to it
    const float row_max = block_max(m, smem);
    const float inv_sum = 1.0f / block_sum(s * __expf(m - row_max), smem);
    // pass 2: write; the last tile is still in registers (for rows up to 32768 values, the only one)
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
        const bool in_registers = t0 + tile >= cols;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int64_t c = t0 + (k * blockDim.x + threadIdx.x) * 4;
            const float4 a = in_registers ? v[k] : load4(xr, c, cols, vec, fill);
            store4(yr, c, cols, vec, make_float4(__expf(fmaf(a.x, scale, -row_max)) * inv_sum,
                                                 __expf(fmaf(a.y, scale, -row_max)) * inv_sum,
                                                 __expf(fmaf(a.z, scale, -row_max)) * inv_sum,
                                                 __expf(fmaf(a.w, scale, -row_max)) * inv_sum));
        }
    }
}

extern "C" void kernel_forward(const float* logits, float* out, int64_t rows, int64_t cols, float temperature, cudaStream_t stream) {
    const float scale = 1.0f / temperature;  // the reference divides by temperature
    if (rows <= 0 || cols <= 0) return;
    // enough threads that each holds at most VEC float4 of the row: a multiple of 32, from 32 to 1024
    int64_t threads = (cols + 3) / 4 + VEC - 1;  // threads per block should be a multiple of 32 and a multiple of 4 for efficient vectorization
    threads = (threads + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    const bool vec = cols % 4 == 0 && (uintptr_t)logits % 16 == 0 && (uintptr_t)out % 16 == 0;
    softmax_rows<<<(unsigned)rows, (unsigned)threads, 0, stream>>>(logits, out, cols, scale, vec);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, temperature: float = 0.7):
        super().__init__()
        self.temperature = temperature

    def forward(self, logits):
        logits = logits.contiguous()
        out = torch.empty_like(logits)
        _lib.kernel_forward(logits, out, logits.numel() // logits.shape[-1], logits.shape[-1], float(self.temperature))
        return out

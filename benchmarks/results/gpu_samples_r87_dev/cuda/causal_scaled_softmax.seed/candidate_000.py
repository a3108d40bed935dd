"""Candidate for causal_scaled_softmax: a scaffolded ModelNew around a native kernel."""
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

// Each thread keeps VEC float4 of its row in registers, so rows of up to 1024 * VEC * 4 = 16384 values
// are read from memory once. Longer rows are done in tiles of that size (the earlier tiles read twice).
constexpr int VEC = 4;

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

// scores c..c+3 of a row times scale; columns >= valid (masked, or past the row's end) are -inf and not read
__device__ __forceinline__ float4 load_scaled(const float* row, int64_t c, int64_t valid, bool vec, float scale) {
    const float4 a = load4(row, c, valid, vec, 0.0f);
    return make_float4(c < valid ? a.x * scale : -INFINITY, c + 1 < valid ? a.y * scale : -INFINITY,
                       c + 2 < valid ? a.z * scale : -INFINITY, c + 3 < valid ? a.w * scale : -INFINITY);
}

// x holds scores of shape (..., T, T) with T = cols: row r is query q = r % T, which sees keys 0..q
// (the causal mask triu(ones(T, T), diagonal=1) hides keys > q). Every row keeps key 0, so none is all -inf.
__global__ void __launch_bounds__(1024) masked_softmax_rows(const float* __restrict__ x, float* __restrict__ out,
                                                            int64_t cols, float scale, bool vec) {
    __shared__ float smem[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    const int64_t q = blockIdx.x % cols;
    const int64_t valid = q + 1;  // unmasked columns of this row: 0..q
    const int64_t tile = (int64_t)blockDim.x * VEC * 4;  // columns the block holds at once
    float4 v[VEC];
    // pass 1 (online softmax): this thread's running max m and sum s of exp(x - m)
    float m = -FLT_MAX, s = 0.0f;
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
        float tile_max = -FLT_MAX;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {  // thread t holds float4 number k * blockDim.x + t: coalesced
            v[k] = load_scaled(xr, t0 + (k * blockDim.x + threadIdx.x) * 4, valid, vec, scale);
            tile_max = fmaxf(tile_max, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
        }
        const float m_new = fmaxf(m, tile_max);
        s *= __expf(m - m_new);  // rescale the sum so far to the new max
#pragma unroll
        for (int k = 0; k < VEC; ++k)  // exp(-inf - m) = 0: masked columns add nothing
            s += __expf(v[k].x - m_new) + __expf(v[k].y - m_new) + __expf(v[k].z - m_new) + __expf(v[k].w - m_new);
        m = m_new;
    }
    // the row's max, then every thread's sum rescaled to it
    const float row_max = block_max(m, smem);
    const float inv_sum = 1.0f / block_sum(s * __expf(m - row_max), smem);
    // pass 2: write every column (masked ones get 0); the last tile is still in registers
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
        const bool in_registers = t0 + tile >= cols;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int64_t c = t0 + (k * blockDim.x + threadIdx.x) * 4;
            const float4 a = in_registers ? v[k] : load_scaled(xr, c, valid, vec, scale);
            store4(yr, c, cols, vec, make_float4(__expf(a.x - row_max) * inv_sum, __expf(a.y - row_max) * inv_sum,
                                                 __expf(a.z - row_max) * inv_sum, __expf(a.w - row_max) * inv_sum));
        }
    }
}

extern "C" void kernel_forward(const float* scores, float* out, int64_t rows, int64_t cols, float scale, cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    // enough threads that each holds at most VEC float4 of the row: a multiple of 32, from 32 to 1024
    int64_t threads = ((cols + 3) / 4 + VEC - 1) / VEC;
    threads = (threads + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    const bool vec = cols % 4 == 0 && (uintptr_t)scores % 16 == 0 && (uintptr_t)out % 16 == 0;
    masked_softmax_rows<<<(unsigned)rows, (unsigned)threads, 0, stream>>>(scores, out, cols, scale, vec);
}
'''
_lib = load_native(KERNEL_SOURCE, lang="cuda")


class ModelNew(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, scores):
        scores = scores.contiguous()
        out = torch.empty_like(scores)
        _lib.kernel_forward(scores, out, scores.numel() // scores.shape[-1], scores.shape[-1], float(self.scale))
        return out

// exemplar: row_sum
// keywords: sum reduce reduction row mean dim keepdim total
// ops: sum
// output: per-row
// about: sum over the last dimension (out has `rows` elements): one block per row, float4 loads (VEC per thread in flight), warp-shuffle reduction.
#include <cuda_runtime.h>
#include <cstdint>
#include <cmath>

// Each thread loads VEC float4 of its row at once (many loads in flight), and repeats for longer rows.
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

__global__ void __launch_bounds__(1024) row_sum_rows(const float* __restrict__ x, float* __restrict__ out,
                                                     int64_t cols, bool vec) {
    __shared__ float smem[32];
    const float* xr = x + blockIdx.x * cols;
    const int64_t tile = (int64_t)blockDim.x * VEC * 4;  // columns the block reads at once
    float s = 0.0f;
    for (int64_t t0 = 0; t0 < cols; t0 += tile) {
        float4 v[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k)  // thread t reads float4 number k * blockDim.x + t: coalesced
            v[k] = load4(xr, t0 + (k * blockDim.x + threadIdx.x) * 4, cols, vec, 0.0f);
#pragma unroll
        for (int k = 0; k < VEC; ++k) s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    s = block_sum(s, smem);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return;
    // enough threads that each holds at most VEC float4 of the row: a multiple of 32, from 32 to 1024
    int64_t threads = ((cols + 3) / 4 + VEC - 1) / VEC;
    threads = (threads + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    const bool vec = cols % 4 == 0 && (uintptr_t)x % 16 == 0;
    row_sum_rows<<<(unsigned)rows, (unsigned)threads, 0, stream>>>(x, out, cols, vec);
}

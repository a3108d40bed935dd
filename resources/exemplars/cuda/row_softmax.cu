// exemplar: row_softmax
// keywords: softmax row exp max sum normalize attention logits dim
// ops: softmax _softmax exp amax max sum sub div
// about: softmax over the last dimension: one block per row, block-wide max and sum via warp shuffles.
#include <cuda_runtime.h>
#include <cstdint>
#include <cfloat>

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
// reduce across the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result
template <bool IsMax>
__device__ float block_reduce(float v, float* smem) {
    v = IsMax ? warp_max(v) : warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = lane < nwarps ? smem[lane] : (IsMax ? -FLT_MAX : 0.0f);
    v = IsMax ? warp_max(v) : warp_sum(v);
    __syncthreads();
    return v;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ out, int64_t cols) {
    __shared__ float smem[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_reduce<true>(m, smem);
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(xr[c] - m);
    s = block_reduce<false>(s, smem);
    const float inv = 1.0f / s;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = __expf(xr[c] - m) * inv;
}

extern "C" void kernel_forward(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
    const int threads = cols >= 1024 ? 1024 : (cols >= 256 ? 256 : 128);
    softmax_rows<<<(unsigned)rows, threads, 0, stream>>>(x, out, cols);
}

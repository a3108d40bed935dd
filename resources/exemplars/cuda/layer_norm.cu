// exemplar: layer_norm
// keywords: layernorm layer_norm norm mean variance var eps weight bias affine normalize
// ops: native_layer_norm layer_norm
// about: LayerNorm over the last dimension: one block per row, block-wide sums via warp shuffles.
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

__global__ void layer_norm_rows(const float* __restrict__ x, const float* __restrict__ weight,
                                const float* __restrict__ bias, float* __restrict__ out, int64_t cols, float eps) {
    __shared__ float smem[32];
    const float* xr = x + blockIdx.x * cols;
    float* yr = out + blockIdx.x * cols;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    const float mean = block_sum(s, smem) / (float)cols;
    float sq = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = xr[c] - mean;
        sq += d * d;
    }
    const float inv_std = rsqrtf(block_sum(sq, smem) / (float)cols + eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - mean) * inv_std * weight[c] + bias[c];
}

extern "C" void kernel_forward(const float* x, const float* weight, const float* bias, float* out,
                               int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
    const int threads = cols >= 1024 ? 1024 : (cols >= 256 ? 256 : 128);
    layer_norm_rows<<<(unsigned)rows, threads, 0, stream>>>(x, weight, bias, out, cols, eps);
}

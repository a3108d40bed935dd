// exemplar: group_norm
// keywords: groupnorm group_norm groups num_groups channels norm mean variance eps weight bias
// ops: native_group_norm group_norm
// about: GroupNorm on [batch, channels, spatial]: one block per (sample, group) computes the statistics
// of its contiguous slice, then applies the per-channel affine.
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

__global__ void group_norm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                                  const float* __restrict__ bias, float* __restrict__ out,
                                  int64_t channels, int64_t spatial, int64_t num_groups, float eps) {
    __shared__ float smem[32];
    const int64_t n = blockIdx.x / num_groups, g = blockIdx.x % num_groups;
    const int64_t per_group = channels / num_groups;
    const int64_t count = per_group * spatial;
    const int64_t base = (n * channels + g * per_group) * spatial;
    float s = 0.0f, sq = 0.0f;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
        float v = x[base + i];
        s += v;
        sq += v * v;
    }
    const float mean = block_sum(s, smem) / (float)count;
    const float var = fmaxf(block_sum(sq, smem) / (float)count - mean * mean, 0.0f);
    const float inv_std = rsqrtf(var + eps);
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
        const int64_t ch = g * per_group + i / spatial;
        out[base + i] = (x[base + i] - mean) * inv_std * weight[ch] + bias[ch];
    }
}

extern "C" void kernel_forward(const float* x, const float* weight, const float* bias, float* out,
                               int64_t batch, int64_t channels, int64_t spatial, float eps, int64_t num_groups,
                               cudaStream_t stream) {
    group_norm_kernel<<<(unsigned)(batch * num_groups), 512, 0, stream>>>(x, weight, bias, out, channels, spatial,
                                                                         num_groups, eps);
}

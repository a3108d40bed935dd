// exemplar: group_norm
// keywords: groupnorm group_norm groups num_groups channels norm mean variance eps weight bias
// ops: native_group_norm group_norm
// optional: weight=1 bias=0
// about: GroupNorm on [batch, channels, spatial]: the blocks of a cluster share each (sample, group) slice, hold it in registers and merge their statistics in distributed shared memory; reads x once.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cstdint>
#include <cmath>

namespace cg = cooperative_groups;

// A group (channels / num_groups channels times spatial values, contiguous in memory) is split over up to
// MAX_PARTS blocks that form one cluster; each thread keeps VEC float4 of its block's share in registers.
// Groups of up to MAX_PARTS * 1024 * VEC * 4 = 131072 values are read once; larger ones in tiles (read twice).
constexpr int VEC = 4;
constexpr int MAX_PARTS = 8;  // the largest portable cluster

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

// sum of (a - mean)^2 over those of the 4 values at offsets c..c+3 that lie below n
__device__ __forceinline__ float sq_dev4(float4 a, float mean, int64_t c, int64_t n) {
    const float dx = a.x - mean, dy = a.y - mean, dz = a.z - mean, dw = a.w - mean;
    if (c + 4 <= n) return dx * dx + dy * dy + dz * dz + dw * dw;
    return (c < n ? dx * dx : 0.0f) + (c + 1 < n ? dy * dy : 0.0f) + (c + 2 < n ? dz * dz : 0.0f);
}

// The group's mean and variance from each block's (count n, mean, sum of squared deviations m2), merged
// exactly (Chan et al.). The blocks of a cluster share one group: each publishes its numbers in its shared
// memory and reads the others' (distributed shared memory). Call cluster_done() before the block ends.
__device__ void cluster_stats(float n, float mean, float m2, float* stats, float* group_mean, float* group_var) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) {
        stats[0] = n;
        stats[1] = mean;
        stats[2] = m2;
    }
    cluster.sync();
    float total = 0.0f, sum = 0.0f;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) {
        const float* s = cluster.map_shared_rank(stats, r);
        total += s[0];
        sum += s[0] * s[1];
    }
    const float mu = sum / total;
    float dev = 0.0f;
    for (unsigned r = 0; r < cluster.num_blocks(); ++r) {
        const float* s = cluster.map_shared_rank(stats, r);
        dev += s[2] + s[0] * (s[1] - mu) * (s[1] - mu);
    }
    cluster.barrier_arrive();  // done reading the others' stats (cluster_done waits for everyone)
    *group_mean = mu;
    *group_var = dev / total;
#else
    *group_mean = mean;  // before sm_90 there are no clusters: the launcher gives each group one block
    *group_var = m2 / n;
#endif
}
// a block's stats must stay readable until every block of its cluster has read them
__device__ void cluster_done() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::this_cluster().barrier_wait();
#endif
}

// (v - mean) * inv_std * weight[ch] + bias[ch] for those of the
// 4 values at group offsets c..c+3 that lie below n (c < n); weight and bias start at the group's first channel
__device__ __forceinline__ float4 affine4(float4 a, int c, int n, int spatial, float mean, float inv_std,
                                         const float* weight, const float* bias) {
    float v[4] = {a.x, a.y, a.z, a.w};
    int ch = c / spatial;  // channel (within the group) of the first value
    float scale = inv_std * weight[ch], shift = bias[ch];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (c + j >= n) break;  // past the share's end: not stored
        if (c + j >= (ch + 1) * spatial) {  // the next channel starts inside these 4 (only if spatial % 4 != 0)
            ch = (c + j) / spatial;
            scale = inv_std * weight[ch];
            shift = bias[ch];
        }
        v[j] = (v[j] - mean) * scale + shift;
    }
    return make_float4(v[0], v[1], v[2], v[3]);
}

__global__ void __launch_bounds__(1024) group_norm_parts(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    float* __restrict__ out, int64_t channels, int64_t spatial, int64_t num_groups, float eps, int parts,
    bool vec) {
    __shared__ float smem[32];
    __shared__ float stats[3];  // this block's count, mean, m2: read by the other blocks of the cluster
    const int64_t group = blockIdx.x / parts;  // (sample, group) index; its values are contiguous
    const int64_t per_group = channels / num_groups;
    const int64_t count = per_group * spatial;  // values in the group
    // this block's share of the group: offsets [begin, end), begin a multiple of 4
    const int64_t share = ((count + parts - 1) / parts + 3) / 4 * 4;
    const int64_t begin = (blockIdx.x % parts) * share;
    const int64_t end = begin + share < count ? begin + share : count;
    const float n = (float)(end > begin ? end - begin : 0);
    const float* xg = x + group * count;
    float* yg = out + group * count;
    const float* wg = weight + (group % num_groups) * per_group;
    const float* bg = bias + (group % num_groups) * per_group;
    const int64_t tile = (int64_t)blockDim.x * VEC * 4;  // values the block holds at once
    float4 v[VEC];
    // this block's mean (values past `end` read as 0)
    float s = 0.0f;
    for (int64_t t0 = begin; t0 < end; t0 += tile) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {  // thread t holds float4 number k * blockDim.x + t: coalesced
            v[k] = load4(xg, t0 + (k * blockDim.x + threadIdx.x) * 4, end, vec, 0.0f);
            s += v[k].x + v[k].y + v[k].z + v[k].w;
        }
    }
    const float block_mean = block_sum(s, smem) / fmaxf(n, 1.0f);
    // its sum of squared deviations; the last tile is still in registers (usually the only one)
    float sq = 0.0f;
    for (int64_t t0 = begin; t0 < end; t0 += tile) {
        const bool in_registers = t0 + tile >= end;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int64_t c = t0 + (k * blockDim.x + threadIdx.x) * 4;
            sq += sq_dev4(in_registers ? v[k] : load4(xg, c, end, vec, 0.0f), block_mean, c, end);
        }
    }
    float mean, var;
    cluster_stats(n, block_mean, block_sum(sq, smem), stats, &mean, &var);
    const float inv_std = rsqrtf(var + eps);
    // write
    for (int64_t t0 = begin; t0 < end; t0 += tile) {
        const bool in_registers = t0 + tile >= end;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int64_t c = t0 + (k * blockDim.x + threadIdx.x) * 4;
            if (c >= end) continue;  // offsets inside a group fit in 32 bits
            const float4 a = in_registers ? v[k] : load4(xg, c, end, vec, 0.0f);
            store4(yg, c, end, vec, affine4(a, (int)c, (int)end, (int)spatial, mean, inv_std, wg, bg));
        }
    }
    cluster_done();
}

extern "C" void kernel_forward(const float* x, const float* weight, const float* bias, float* out,
                               int64_t batch, int64_t channels, int64_t spatial, float eps, int64_t num_groups,
                               cudaStream_t stream) {
    const int64_t count = channels / num_groups * spatial;
    if (batch <= 0 || count <= 0) return;
    int device = 0, clusters = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device);  // Hopper (sm_90) and later
    // blocks per group: enough that a block of 256 threads holds its share in registers, at most MAX_PARTS
    int parts = (int)((count + 256 * VEC * 4 - 1) / (256 * VEC * 4));
    parts = !clusters ? 1 : (parts > MAX_PARTS ? MAX_PARTS : parts);
    const int64_t share = ((count + parts - 1) / parts + 3) / 4 * 4;
    // threads: enough that each holds at most VEC float4 of the share, a multiple of 32, from 32 to 1024
    int64_t threads = (share / 4 + VEC - 1) / VEC;
    threads = (threads + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > 1024 ? 1024 : threads);
    const bool vec = count % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)out % 16 == 0;
    const unsigned blocks = (unsigned)(batch * num_groups * parts);
    if (!clusters) {
        group_norm_parts<<<blocks, (unsigned)threads, 0, stream>>>(x, weight, bias, out, channels, spatial,
                                                                    num_groups, eps, parts, vec);
        return;
    }
    // launch in clusters of `parts` blocks: the blocks of one group run at the same time and share memory
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(blocks);
    config.blockDim = dim3((unsigned)threads);
    config.stream = stream;
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = (unsigned)parts;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    cudaLaunchKernelEx(&config, group_norm_parts, x, weight, bias, out, channels, spatial, num_groups, eps, parts,
                       vec);
}

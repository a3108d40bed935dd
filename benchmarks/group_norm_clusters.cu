// The GroupNorm+SiLU CUDA exemplar before it became two passes through L2 (commit cec20b7): a cluster of blocks
// shares each (sample, group) slice held in registers, merged in distributed shared memory; x is read once.
// Kept to be measured beside the exemplar: benchmarks/group_norm_variants.py.
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cstdint>
#include <cmath>

namespace cg = cooperative_groups;

// Each thread keeps VEC float4 of its block's part of a group in registers; a block has up to THREADS threads.
// A group (channels / num_groups channels times spatial values, contiguous in memory) is split over up to
// MAX_PARTS blocks of one cluster: groups of up to MAX_PARTS * THREADS * VEC * 4 values are read once,
// larger ones in tiles (read twice).
#ifndef VEC
#define VEC 8
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef MAX_PARTS
#define MAX_PARTS 8  // the largest portable cluster (16 on Hopper with the non-portable attribute)
#endif

// (sum, sum of squares) over the block: each warp reduces, then warp 0 reduces the warps' results
__device__ float2 block_sum2(float2 v, float2* smem) {
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_xor_sync(0xffffffff, v.x, o);
        v.y += __shfl_xor_sync(0xffffffff, v.y, o);
    }
    if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? smem[threadIdx.x] : make_float2(0.0f, 0.0f);
    if (threadIdx.x < 32)
        for (int o = 16; o > 0; o >>= 1) {
            v.x += __shfl_xor_sync(0xffffffff, v.x, o);
            v.y += __shfl_xor_sync(0xffffffff, v.y, o);
        }
    return v;  // complete in thread 0
}

// the 4 values at offsets c..c+3 of p (c a multiple of 4); offsets >= n read as `fill`.
// vec: p is 16-byte aligned, so 4 values below n are one float4 load.
__device__ __forceinline__ float4 load4(const float* p, int64_t c, int64_t n, bool vec, float fill) {
    if (vec && c + 4 <= n) return __ldcs(reinterpret_cast<const float4*>(p + c));  // read once: do not keep in L2
    return make_float4(c < n ? p[c] : fill, c + 1 < n ? p[c + 1] : fill,
                       c + 2 < n ? p[c + 2] : fill, c + 3 < n ? p[c + 3] : fill);
}

// a fast divide: exact enough for a norm's output, and for v -> -inf it gives -0 as silu does
__device__ __forceinline__ float silu(float v) { return __fdividef(v, 1.0f + __expf(-v)); }

// c / spatial without an integer division: a float estimate, corrected to the exact quotient
__device__ __forceinline__ int channel_of(int c, int spatial, float inv_spatial) {
    int ch = __float2int_rz((float)c * inv_spatial);
    if (ch * spatial > c) --ch;
    else if ((ch + 1) * spatial <= c) ++ch;
    return ch;
}

// silu((v - mean) * inv_std * weight[ch] + bias[ch]) for the values at group offsets c..c+3 below n, stored
// to y; weight and bias start at the group's first channel
__device__ __forceinline__ void write4(float* y, float4 a, int c, int n, int spatial, float inv_spatial, bool vec,
                                      float mean, float inv_std, const float* weight, const float* bias) {
    if (vec && c + 4 <= n && spatial % 4 == 0) {  // the 4 values are one channel's
        const int ch = channel_of(c, spatial, inv_spatial);
        const float scale = inv_std * __ldg(weight + ch), shift = __ldg(bias + ch) - mean * scale;
        const float4 r = make_float4(silu(a.x * scale + shift), silu(a.y * scale + shift),
                                     silu(a.z * scale + shift), silu(a.w * scale + shift));
        __stcs(reinterpret_cast<float4*>(y + c), r);  // written once: streaming store
        return;
    }
    const float v[4] = {a.x, a.y, a.z, a.w};
    for (int j = 0; j < 4 && c + j < n; ++j) {
        const int ch = channel_of(c + j, spatial, inv_spatial);
        y[c + j] = silu((v[j] - mean) * inv_std * weight[ch] + bias[ch]);
    }
}

// One block per part of a group; the `parts` blocks of a group form one cluster (parts == 1 without clusters).
// Statistics: sums of (x - K) and (x - K)^2 with K the group's first value, so the one-pass variance
// E[(x-K)^2] - E[x-K]^2 keeps its precision when the values sit far from zero.
__global__ void __launch_bounds__(THREADS) group_norm_silu_parts(
    const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
    float* __restrict__ out, int64_t channels, int64_t spatial, int64_t num_groups, float eps, int parts,
    bool vec) {
    __shared__ float2 smem[32];
    __shared__ float2 sums;      // this block's sums: read by the other blocks of the cluster
    __shared__ float2 mean_std;  // the group's mean and 1 / std, for the whole block
    const int64_t group = blockIdx.x / parts;  // (sample, group) index; its values are contiguous
    const int64_t per_group = channels / num_groups;
    const int64_t count = per_group * spatial;  // values in the group
    // this block's part of the group: offsets [begin, end), begin a multiple of 4
    const int64_t part = ((count + parts - 1) / parts + 3) / 4 * 4;
    const int64_t begin = (blockIdx.x % parts) * part;
    const int64_t end = begin + part < count ? begin + part : count;
    const float* xg = x + group * count;
    float* yg = out + group * count;
    const float* wg = weight + (group % num_groups) * per_group;
    const float* bg = bias + (group % num_groups) * per_group;
    const float K = xg[0];
    const int64_t tile = (int64_t)blockDim.x * VEC * 4;  // values the block holds at once
    float4 v[VEC];
    float2 s = make_float2(0.0f, 0.0f);
    for (int64_t t0 = begin; t0 < end; t0 += tile) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {  // thread t holds float4 number k * blockDim.x + t: coalesced
            v[k] = load4(xg, t0 + (k * blockDim.x + threadIdx.x) * 4, end, vec, K);  // past the end: K adds 0
            const float a = v[k].x - K, b = v[k].y - K, c = v[k].z - K, d = v[k].w - K;
            s.x += (a + b) + (c + d);
            s.y += (a * a + b * b) + (c * c + d * d);
        }
    }
    s = block_sum2(s, smem);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) sums = s;
    cluster.sync();  // every block's sums are published
    if (threadIdx.x < 32) {  // warp 0: lane r reads block r's sums
        s = threadIdx.x < parts ? *cluster.map_shared_rank(&sums, threadIdx.x) : make_float2(0.0f, 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            s.x += __shfl_xor_sync(0xffffffff, s.x, o);
            s.y += __shfl_xor_sync(0xffffffff, s.y, o);
        }
    }
    cluster.barrier_arrive();  // done reading the others' sums (waited for before the block ends)
#endif
    if (threadIdx.x == 0) {
        const float mean_k = s.x / (float)count;
        const float var = fmaxf(s.y / (float)count - mean_k * mean_k, 0.0f);
        mean_std = make_float2(K + mean_k, rsqrtf(var + eps));
    }
    __syncthreads();
    const float mean = mean_std.x, inv_std = mean_std.y, inv_spatial = 1.0f / (float)spatial;
    for (int64_t t0 = begin; t0 < end; t0 += tile) {
        const bool in_registers = t0 + tile >= end;  // the last tile (usually the only one)
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const int64_t c = t0 + (k * blockDim.x + threadIdx.x) * 4;
            if (c < end)  // offsets inside a group fit in 32 bits (the launcher checks)
                write4(yg, in_registers ? v[k] : load4(xg, c, end, vec, K), (int)c, (int)end, (int)spatial,
                       inv_spatial, vec, mean, inv_std, wg, bg);
        }
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cluster.barrier_wait();  // this block's sums stay readable until every block of the cluster has read them
#endif
}

extern "C" void kernel_forward(const float* x, const float* weight, const float* bias, float* out,
                               int64_t batch, int64_t channels, int64_t spatial, float eps, int64_t num_groups,
                               cudaStream_t stream) {
    const int64_t count = channels / num_groups * spatial;
    if (batch <= 0 || count <= 0 || count > INT32_MAX) return;  // a group of 2^31 values is 8 GB
    static int clusters = -1;  // Hopper (sm_90) and later launch clusters
    if (clusters < 0) {
        int device = 0;
        cudaGetDevice(&device);
        cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device);
        if (clusters && MAX_PARTS > 8)
            cudaFuncSetAttribute(group_norm_silu_parts, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    }
    // blocks per group: enough that each part fits in the registers of THREADS threads, at most MAX_PARTS
    int parts = (int)((count + THREADS * VEC * 4 - 1) / (THREADS * VEC * 4));
    parts = !clusters ? 1 : (parts > MAX_PARTS ? MAX_PARTS : parts);
    const int64_t part = ((count + parts - 1) / parts + 3) / 4 * 4;
    // threads: enough that each holds at most VEC float4 of the part, a multiple of 32, from 32 to THREADS
    int64_t threads = (part / 4 + VEC - 1) / VEC;
    threads = (threads + 31) / 32 * 32;
    threads = threads < 32 ? 32 : (threads > THREADS ? THREADS : threads);
    const bool vec = count % 4 == 0 && (uintptr_t)x % 16 == 0 && (uintptr_t)out % 16 == 0;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)(batch * num_groups * parts));
    config.blockDim = dim3((unsigned)threads);
    config.stream = stream;
    cudaLaunchAttribute cluster;  // the `parts` blocks of a group run at the same time and share memory
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = (unsigned)parts;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = clusters ? 1 : 0;
    cudaLaunchKernelEx(&config, group_norm_silu_parts, x, weight, bias, out, channels, spatial, num_groups, eps, parts,
                       vec);
}
